package main

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/workflows"
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
	known, err := knownRegions(ctx, tc)
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

// knownRegions runs ListRegions and returns its answer.
func knownRegions(ctx context.Context, tc client.Client) ([]string, error) {
	opts := client.StartWorkflowOptions{
		ID:                       workflows.ListRegionsID + uuid.NewString(),
		TaskQueue:                workflows.TaskQueue,
		WorkflowExecutionTimeout: regionsTimeout,
	}
	run, err := tc.ExecuteWorkflow(ctx, opts, workflows.ListRegions)
	if err != nil {
		return nil, fmt.Errorf("ask the workers for their regions: %w", err)
	}
	var names []string
	err = run.Get(ctx, &names)
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case temporal.IsTimeoutError(err):
		return nil, fmt.Errorf("no worker answered on task queue %s within %s, so the region names cannot be checked: is `ironflow worker` (or make dev) running on this Temporal and namespace, and as recent as this CLI?",
			workflows.TaskQueue, regionsTimeout)
	case err != nil:
		return nil, fmt.Errorf("ask the workers for their regions: %s", failureMessage(err))
	}
	return names, nil
}

// temporalNoise is what the SDK adds to an error's text when it passes an activity or a child
// workflow (event IDs, worker identity, error type): useful in a history, noise to a user.
var temporalNoise = regexp.MustCompile(
	`activity error \(type: [^,]*, scheduledEventID: \d+, startedEventID: \d+, identity: [^)]*\): ` +
		`|child workflow execution error \(type: [^,]*, workflowID: [^,]*, runID: [^,]*, initiatedEventID: \d+, startedEventID: \d+\): ` +
		`| \(type: \w+, retryable: (true|false)\)`)

// plainError is an error text a workflow recorded, without the SDK's wrapping.
func plainError(text string) string {
	return temporalNoise.ReplaceAllString(text, "")
}
