package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/workflows/moves"
)

// regionsTimeout bounds the wait for a worker to say which regions it knows (a variable so
// that tests need not wait as long).
var regionsTimeout = 15 * time.Second

// regionArg is a region name the user gave, and where (a flag, or the -E region).
type regionArg struct {
	from string // e.g. "--to"
	name string
}

// checkRegions refuses region names the workers do not know, before anything is started:
// a migration to an unknown region would only fail once a worker runs it, and a schedule
// only at its first run. Commands check the names before they ask the source for a grant:
// a misspelt region is the first thing to fix, and no grant is issued for a move that
// cannot start. The names come from the workers themselves (workflows.ListRegions),
// as only they hold the regions file.
func checkRegions(ctx context.Context, tc client.Client, args ...regionArg) error {
	known, err := moves.Regions(ctx, tc, regionsTimeout)
	var noWorker *moves.NoWorkerError
	if errors.As(err, &noWorker) {
		return fmt.Errorf("%w, so the region names cannot be checked: is `ironflow worker` (or make dev) running on this Temporal and namespace, and as recent as this CLI?", err)
	}
	if err != nil {
		return err
	}
	for _, a := range args {
		if !slices.Contains(known, a.name) {
			return fmt.Errorf("unknown region %q (%s): the workers' regions file has %s",
				a.name, a.from, strings.Join(known, ", "))
		}
	}
	return nil
}
