// Package workers wires workflows and activities into Temporal workers.
package workers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/workflows"
)

// Option changes the worker options of NewMigrationWorker.
type Option func(*worker.Options)

// WithOptions replaces the worker options (concurrency, identity, ...).
func WithOptions(o worker.Options) Option {
	return func(opts *worker.Options) { *opts = o }
}

// NewMigrationWorker returns a worker on workflows.TaskQueue running the migration
// workflows and their activities. Call Run or Start on it.
func NewMigrationWorker(c client.Client, acts *activities.Activities, opts ...Option) worker.Worker {
	var o worker.Options
	for _, opt := range opts {
		opt(&o)
	}
	w := worker.New(c, workflows.TaskQueue, o)
	RegisterMigration(w, acts)
	return w
}

// RegisterMigration registers the migration workflows and activities on r.
func RegisterMigration(r worker.Registry, acts *activities.Activities) {
	r.RegisterWorkflow(workflows.MigrateMachine)
	r.RegisterWorkflow(workflows.TransferRack)
	r.RegisterWorkflow(workflows.RecoverRackTransfer)
	r.RegisterWorkflow(workflows.BulkMigrate)
	r.RegisterWorkflow(workflows.MigrateMachineBatch)
	r.RegisterWorkflow(workflows.ListRegions)
	r.RegisterWorkflow(workflows.PodCompose)
	r.RegisterWorkflow(workflows.PodDecompose)
	r.RegisterWorkflow(workflows.PodRefresh)
	r.RegisterWorkflow(workflows.PodPower)
	r.RegisterWorkflow(workflows.MachinePower)
	r.RegisterWorkflow(workflows.CommissionMachine)
	r.RegisterActivity(acts)
}

// RegisterSearchAttributes adds the workflows' custom search attributes to namespace, skipping
// those already there, so a dev server or a test server accepts the workflows' upserts. It
// returns once the server accepts a query naming them: a server's frontend may know the
// namespace's new attributes only at its next namespace refresh (the Temporal server on
// PostgreSQL: up to 2 s later), and until then refuses workflows that set them.
func RegisterSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	existing, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes of %s: %w", namespace, err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for _, key := range workflows.SearchAttributes() {
		if _, ok := existing.GetCustomAttributes()[key.GetName()]; !ok {
			missing[key.GetName()] = key.GetValueType()
		}
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: namespace, SearchAttributes: missing})
	if err != nil {
		return fmt.Errorf("add search attributes to %s: %w", namespace, err)
	}
	return waitSearchAttributes(ctx, c, namespace, missing)
}

func waitSearchAttributes(ctx context.Context, c client.Client, namespace string, attrs map[string]enumspb.IndexedValueType) error {
	names := slices.Sorted(maps.Keys(attrs))
	terms := make([]string, len(names))
	for i, name := range names {
		terms[i] = name + " = " + zeroLiteral(attrs[name])
	}
	query := strings.Join(terms, " AND ")
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		_, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: namespace, Query: query})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("search attributes %v added to %s but not queryable: %w", names, namespace, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// zeroLiteral is a value of type t in a visibility query.
func zeroLiteral(t enumspb.IndexedValueType) string {
	switch t {
	case enumspb.INDEXED_VALUE_TYPE_INT, enumspb.INDEXED_VALUE_TYPE_DOUBLE:
		return "0"
	case enumspb.INDEXED_VALUE_TYPE_BOOL:
		return "false"
	case enumspb.INDEXED_VALUE_TYPE_DATETIME:
		return "'1970-01-01T00:00:00Z'"
	default: // keyword, keyword list, text
		return "''"
	}
}
