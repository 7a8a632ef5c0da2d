// Package activities holds the Temporal activities of Ironflow's workflows. Activities talk to
// regions through the Region interface; credentials come from the worker's regions file, never
// from workflow inputs.
package activities

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

// Region is what the migration activities need from one region (see region/api/migration.go).
type Region interface {
	Info(ctx context.Context) (api.Info, error)
	GetMachine(ctx context.Context, key string) (api.Machine, error)
	// DeleteMachine deletes the machine at key for migration (a workflow ID), which may hold it.
	DeleteMachine(ctx context.Context, key, migration string) error
	GetJob(ctx context.Context, key string) (api.Job, error)
	MintTicket(ctx context.Context, req api.TicketRequest) (api.Ticket, error)
	Quiesce(ctx context.Context, key string, req api.QuiesceRequest) (api.Machine, error)
	// The steps of a migration name it (a workflow ID): a region refuses a step for a machine
	// another migration holds.
	UnquiesceFor(ctx context.Context, key, migration string) (api.Machine, error)
	Export(ctx context.Context, key string) (api.Bundle, error)
	Import(ctx context.Context, req api.ImportRequest) (api.Machine, error)
	FinalizeMigrationFor(ctx context.Context, key, migration string, req api.FinalizeRequest) (api.Machine, error)
	RestoreMigrationFor(ctx context.Context, key, migration string) (api.Machine, error)
	ActivateFor(ctx context.Context, key, migration string) (api.Machine, error)
	GrantVerifier
	RedirectCopy(ctx context.Context, key string, req api.RedirectCopyRequest) (api.Machine, error)
}

// RegionResolver finds the Region client of a region by its name or its public URL, and
// lists the region names it knows.
type RegionResolver interface {
	Region(nameOrURL string) (Region, error)
	Names() []string
}

// ClientRegion adapts *client.Client to Region: the generic CRUD calls become the named
// machine and job calls the activities use.
type ClientRegion struct {
	*client.Client
}

// GetMachine returns the machine at key (UUID or "Field:value").
func (c ClientRegion) GetMachine(ctx context.Context, key string) (api.Machine, error) {
	return c.Machines().Get(ctx, key)
}

// DeleteMachine deletes the machine at key for migration, without force.
func (c ClientRegion) DeleteMachine(ctx context.Context, key, migration string) error {
	return c.DeleteForMigration(ctx, key, migration)
}

// GetJob returns the job at key.
func (c ClientRegion) GetJob(ctx context.Context, key string) (api.Job, error) {
	return c.Jobs().Get(ctx, key)
}

// Application error types set by the activities and the workflow, so callers can tell
// failures apart with temporal.ApplicationError.Type(). They are type names (strings), not
// errors: the values are recorded in workflow histories and must never change.
const (
	ErrTypeUnknownRegion       = "UnknownRegion"
	ErrTypeRegionMismatch      = "RegionMismatch"
	ErrTypeMachineNotFound     = "MachineNotFound"
	ErrTypeWorkOrderMode       = "WorkOrderMode"
	ErrTypeAlreadyMigrating    = "AlreadyMigrating"
	ErrTypeAlreadyMigrated     = "AlreadyMigrated"
	ErrTypeDestinationConflict = "DestinationConflict"
	ErrTypeRegionRefused       = "RegionRefused"
	ErrTypeUnsafeDelete        = "UnsafeDelete"
	ErrTypeAgentCheckInTimeout = "AgentCheckInTimeout"
	// ErrTypeStaleAttempt: the region refused a step because a newer attempt of the batch
	// acted on the machine (client.APIError.StaleAttempt); this attempt leaves it alone.
	ErrTypeStaleAttempt = "StaleAttempt"
)

// classify turns a region error into an activity error: the region's 4xx answers are final
// (retrying the same request cannot change them; a stale attempt's refusal is
// ErrTypeStaleAttempt), while 5xx, 408, 429 and network errors are returned as they are so
// Temporal retries them.
func classify(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	msg := fmt.Sprintf(format, args...)
	var apiErr *client.APIError
	if errors.As(err, &apiErr) && apiErr.StaleAttempt() {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: %v", msg, err), ErrTypeStaleAttempt, err)
	}
	if isFinal(err) {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: %v", msg, err), ErrTypeRegionRefused, err)
	}
	return fmt.Errorf("%s: %w", msg, err)
}

func isFinal(err error) bool {
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	switch apiErr.StatusCode {
	case http.StatusRequestTimeout, http.StatusTooManyRequests:
		return false
	}
	return apiErr.StatusCode >= 400 && apiErr.StatusCode < 500
}

// isNotFound reports a 404 answer.
func isNotFound(err error) bool {
	var apiErr *client.APIError
	return errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusNotFound
}

func nonRetryable(errType, format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), errType, nil)
}
