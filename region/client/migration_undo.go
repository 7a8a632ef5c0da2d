package client

import (
	"context"
	"net/http"

	"github.com/ironflow/ironflow/region/api"
)

// RedirectCopy turns the inactive imported copy at key on this (destination) region into a
// locked stub redirecting to req.RedirectEndpoint, the source (compensation of an import
// after the source may have redirected the machine's agent here).
func (c *Client) RedirectCopy(ctx context.Context, key string, req api.RedirectCopyRequest) (api.Machine, error) {
	return machineStep(ctx, c, key, "redirect-copy", "", req) // the body names the migration
}

// RecordCompensationDecision audits on this (source) region an operator's answer to the stuck
// compensation of the migration of the machine with UUID machine.
func (c *Client) RecordCompensationDecision(ctx context.Context, machine string, d api.CompensationDecision) error {
	path, err := keyPath(api.KindMachines, machine, "compensation-decisions")
	if err != nil {
		return err
	}
	return c.send(ctx, Request{Method: http.MethodPost, Path: path, Body: d})
}

// RecordMoveControl audits on this (source) region an operator's control of a move.
func (c *Client) RecordMoveControl(ctx context.Context, mc api.MoveControl) error {
	return c.send(ctx, Request{Method: http.MethodPost, Path: api.PathPrefix + "/" + api.KindMoveControls, Body: mc})
}
