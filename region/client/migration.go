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

// Quiesce stops the machine at key on this (source) region and snapshots it.
func (c *Client) Quiesce(ctx context.Context, key string, req api.QuiesceRequest) (api.Machine, error) {
	return callKey[api.Machine](ctx, c, http.MethodPost, req, api.KindMachines, key, "quiesce")
}

// Unquiesce restores the machine at key on the source from its snapshot (compensation of Quiesce).
func (c *Client) Unquiesce(ctx context.Context, key string) (api.Machine, error) {
	return callKey[api.Machine](ctx, c, http.MethodPost, nil, api.KindMachines, key, "unquiesce")
}

// Export returns the bundle (machine, jobs, logs, profiles) of the machine at key on the source.
func (c *Client) Export(ctx context.Context, key string) (api.Bundle, error) {
	return callAt[api.Bundle](ctx, c, Request{Method: http.MethodGet, Limit: MaxBundle}, api.KindMachines, key, "export")
}

// Import creates the bundle's machine, inactive, on this (destination) region. req.Ticket
// travels in api.TicketHeader.
func (c *Client) Import(ctx context.Context, req api.ImportRequest) (api.Machine, error) {
	return call[api.Machine](ctx, c, Request{Method: http.MethodPost, Path: apiPath(api.KindMachines, "import"),
		Header: http.Header{api.TicketHeader: {req.Ticket}}, Body: req})
}

// FinalizeMigration turns the machine at key on the source into a locked stub redirecting
// to the destination.
func (c *Client) FinalizeMigration(ctx context.Context, key string, req api.FinalizeRequest) (api.Machine, error) {
	return callKey[api.Machine](ctx, c, http.MethodPost, req, api.KindMachines, key, "finalize-migration")
}

// RestoreMigration undoes FinalizeMigration on the source from its snapshot (compensation).
func (c *Client) RestoreMigration(ctx context.Context, key string) (api.Machine, error) {
	return callKey[api.Machine](ctx, c, http.MethodPost, nil, api.KindMachines, key, "restore-migration")
}

// DeleteForMigration deletes the machine at key for migration (a workflow ID), which may hold it.
func (c *Client) DeleteForMigration(ctx context.Context, key, migration string) error {
	path, err := keyPath(api.KindMachines, key)
	if err != nil {
		return err
	}
	return c.send(ctx, Request{Method: http.MethodDelete, Path: path, Query: url.Values{"migration": {migration}}})
}

// Activate makes the imported machine at key runnable and available on this (destination) region.
func (c *Client) Activate(ctx context.Context, key string) (api.Machine, error) {
	return callKey[api.Machine](ctx, c, http.MethodPost, nil, api.KindMachines, key, "activate")
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
