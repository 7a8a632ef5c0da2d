package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/ironflow/ironflow/region/api"
)

// Migration calls of region/api/migration.go. Each comment names the region it is meant for.

// MintTicket asks this (destination) region for a single-use import ticket.
func (c *Client) MintTicket(ctx context.Context, req api.TicketRequest) (api.Ticket, error) {
	return call[api.Ticket](ctx, c, Request{Method: http.MethodPost, Path: apiPath("migrate-tickets"), Body: req})
}

// ForAttempt marks ctx as the context of attempt a of a batch activity: every migration step
// a Client sends with it (quiesce, unquiesce, import, finalize, restore, activate,
// redirect-copy, a delete for a migration) names a in ?attempt= (api.ParamAttempt), and the
// region refuses it once a newer attempt of its migration acted on the machine
// (APIError.StaleAttempt). It travels in the context so that no step of the attempt can leave
// it out. A zero a marks nothing.
func ForAttempt(ctx context.Context, a api.Attempt) context.Context {
	if a.IsZero() {
		return ctx
	}
	return context.WithValue(ctx, attemptKey{}, a)
}

type attemptKey struct{}

// AttemptOf returns the attempt ctx is marked with (ForAttempt), zero when none.
func AttemptOf(ctx context.Context) api.Attempt {
	a, _ := ctx.Value(attemptKey{}).(api.Attempt)
	return a
}

// withAttempt adds ctx's attempt (ForAttempt) to the query of a migration step.
func withAttempt(ctx context.Context, query url.Values) url.Values {
	a := AttemptOf(ctx)
	if a.IsZero() {
		return query
	}
	if query == nil {
		query = url.Values{}
	}
	query.Set(api.ParamAttempt, a.String())
	return query
}

// Quiesce stops the machine at key on this (source) region and snapshots it.
func (c *Client) Quiesce(ctx context.Context, key string, req api.QuiesceRequest) (api.Machine, error) {
	return machineStep(ctx, c, key, "quiesce", "", req) // the body names the migration
}

// Unquiesce restores the machine at key on the source from its snapshot (compensation of Quiesce).
func (c *Client) Unquiesce(ctx context.Context, key string) (api.Machine, error) {
	return c.UnquiesceFor(ctx, key, "")
}

// UnquiesceFor is Unquiesce for migration (a workflow ID): refused when another migration
// holds the machine.
func (c *Client) UnquiesceFor(ctx context.Context, key, migration string) (api.Machine, error) {
	return machineStep(ctx, c, key, "unquiesce", migration, nil)
}

// machineStep posts action, with in as its body, on the machine at key for migration (a
// workflow ID; "" names none), named in the query as DeleteForMigration names it: the region
// refuses the step when another migration holds the machine, or a newer attempt acted on it.
func machineStep(ctx context.Context, c *Client, key, action, migration string, in any) (api.Machine, error) {
	path, err := keyPath(api.KindMachines, key, action)
	if err != nil {
		return api.Machine{}, err
	}
	var query url.Values
	if migration != "" {
		query = url.Values{"migration": {migration}}
	}
	return call[api.Machine](ctx, c, Request{Method: http.MethodPost, Path: path, Query: withAttempt(ctx, query), Body: in})
}

// Export returns the bundle (machine, jobs, logs, profiles) of the machine at key on the source.
func (c *Client) Export(ctx context.Context, key string) (api.Bundle, error) {
	return callAt[api.Bundle](ctx, c, Request{Method: http.MethodGet, Limit: MaxBundle}, api.KindMachines, key, "export")
}

// Import creates the bundle's machine, inactive, on this (destination) region. req.Ticket
// travels in api.TicketHeader.
func (c *Client) Import(ctx context.Context, req api.ImportRequest) (api.Machine, error) {
	return call[api.Machine](ctx, c, Request{Method: http.MethodPost, Path: apiPath(api.KindMachines, "import"),
		Query: withAttempt(ctx, nil), Header: http.Header{api.TicketHeader: {req.Ticket}}, Body: req})
}

// FinalizeMigration turns the machine at key on the source into a locked stub redirecting
// to the destination.
func (c *Client) FinalizeMigration(ctx context.Context, key string, req api.FinalizeRequest) (api.Machine, error) {
	return c.FinalizeMigrationFor(ctx, key, "", req)
}

// FinalizeMigrationFor is FinalizeMigration for migration: refused when another migration
// holds the machine.
func (c *Client) FinalizeMigrationFor(ctx context.Context, key, migration string, req api.FinalizeRequest) (api.Machine, error) {
	return machineStep(ctx, c, key, "finalize-migration", migration, req)
}

// RestoreMigration undoes FinalizeMigration on the source from its snapshot (compensation).
func (c *Client) RestoreMigration(ctx context.Context, key string) (api.Machine, error) {
	return c.RestoreMigrationFor(ctx, key, "")
}

// RestoreMigrationFor is RestoreMigration for migration: refused when another migration
// holds the stub.
func (c *Client) RestoreMigrationFor(ctx context.Context, key, migration string) (api.Machine, error) {
	return machineStep(ctx, c, key, "restore-migration", migration, nil)
}

// DeleteForMigration deletes the machine at key for migration (a workflow ID), which may hold it.
func (c *Client) DeleteForMigration(ctx context.Context, key, migration string) error {
	path, err := keyPath(api.KindMachines, key)
	if err != nil {
		return err
	}
	return c.send(ctx, Request{Method: http.MethodDelete, Path: path, Query: withAttempt(ctx, url.Values{"migration": {migration}})})
}

// Activate makes the imported machine at key runnable and available on this (destination) region.
func (c *Client) Activate(ctx context.Context, key string) (api.Machine, error) {
	return c.ActivateFor(ctx, key, "")
}

// ActivateFor is Activate for migration: refused when another migration holds the copy.
func (c *Client) ActivateFor(ctx context.Context, key, migration string) (api.Machine, error) {
	return machineStep(ctx, c, key, "activate", migration, nil)
}

// IssueGrant asks this (source) region for a grant to start a move (region/api/grants.go).
func (c *Client) IssueGrant(ctx context.Context, req api.GrantRequest) (api.Grant, error) {
	return call[api.Grant](ctx, c, Request{Method: http.MethodPost, Path: apiPath("migrate-grants"), Body: req})
}

// VerifyGrant asks this (source) region whether a grant covers a move; it audits the move.
func (c *Client) VerifyGrant(ctx context.Context, req api.GrantCheck) (api.GrantClaims, error) {
	return call[api.GrantClaims](ctx, c, Request{Method: http.MethodPost, Path: apiPath("migrate-grants", "verify"), Body: req})
}

// RevokeGrant revokes a grant this region issued.
func (c *Client) RevokeGrant(ctx context.Context, id string) error {
	return c.send(ctx, Request{Method: http.MethodDelete, Path: apiPath("migrate-grants", id)})
}

// Whoami returns the caller as this region sees it.
func (c *Client) Whoami(ctx context.Context) (api.Whoami, error) {
	return call[api.Whoami](ctx, c, Request{Method: http.MethodGet, Path: apiPath("whoami")})
}
