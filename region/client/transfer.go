package client

import (
	"context"
	"net/http"
	"strconv"

	"github.com/ironflow/ironflow/region/api"
)

// Rack transfer calls of region/api/transfer.go. Each comment names the region it is meant for.

// PauseRack marks the rack paused on this (source) region, held by hold (a zero hold names
// no transfer run).
func (c *Client) PauseRack(ctx context.Context, rack string, hold api.RackHold) (api.Rack, error) {
	var in any
	if !hold.IsZero() {
		in = hold
	}
	return callKey[api.Rack](ctx, c, http.MethodPost, in, api.KindRacks, rack, "pause")
}

// RecoverRackTransfer undoes or finishes here what a closed transfer run left of the rack.
func (c *Client) RecoverRackTransfer(ctx context.Context, rack string, rec api.RackRecovery) (api.RackRecovered, error) {
	return callKey[api.RackRecovered](ctx, c, http.MethodPost, rec, api.KindRacks, rack, "recover")
}

// UnpauseRack ends the rack's pause (compensation on the source, last step on the target).
func (c *Client) UnpauseRack(ctx context.Context, rack string) (api.Rack, error) {
	return callKey[api.Rack](ctx, c, http.MethodPost, nil, api.KindRacks, rack, "unpause")
}

// ExportRack returns what moves with the rack besides its machines (source).
func (c *Client) ExportRack(ctx context.Context, rack string) (api.RackBundle, error) {
	return callAt[api.RackBundle](ctx, c, Request{Method: http.MethodGet, Limit: MaxBundle}, api.KindRacks, rack, "export")
}

// CheckRackImport lists the target's conflicts with b; it changes nothing (target).
func (c *Client) CheckRackImport(ctx context.Context, b api.RackBundle) (api.TransferCheck, error) {
	return call[api.TransferCheck](ctx, c, Request{Method: http.MethodPost, Path: apiPath(api.KindRacks, "import", "check"), Body: b})
}

// ImportRack upserts b by UUID (target).
func (c *Client) ImportRack(ctx context.Context, b api.RackBundle) (api.RackImport, error) {
	return call[api.RackImport](ctx, c, Request{Method: http.MethodPost, Path: apiPath(api.KindRacks, "import"), Body: b})
}

// UndoRackImport deletes what imports of the rack created (target; compensation).
func (c *Client) UndoRackImport(ctx context.Context, rack string) error {
	path, err := keyPath(api.KindRacks, rack, "import")
	if err != nil {
		return err
	}
	return c.send(ctx, Request{Method: http.MethodDelete, Path: path})
}

// HandOverRack drops the rack's moved network and pods and deletes it without force (source).
func (c *Client) HandOverRack(ctx context.Context, rack string) error {
	path, err := keyPath(api.KindRacks, rack, "hand-over")
	if err != nil {
		return err
	}
	return c.send(ctx, Request{Method: http.MethodPost, Path: path})
}

// RackOperations lists the unreleased operations queued for the rack and its machines.
func (c *Client) RackOperations(ctx context.Context, rack string) ([]api.PendingOperation, error) {
	return callKey[[]api.PendingOperation](ctx, c, http.MethodGet, nil, api.KindRacks, rack, "operations")
}

// RackOperation returns operation id of the rack, released or not: a queued write (the
// Location of its 202) with its Outcome once replayed.
func (c *Client) RackOperation(ctx context.Context, rack string, id int64) (api.PendingOperation, error) {
	return callKey[api.PendingOperation](ctx, c, http.MethodGet, nil, api.KindRacks, rack, "operations", strconv.FormatInt(id, 10))
}

// QueueRackOperation queues op for the paused rack or one of its machines.
func (c *Client) QueueRackOperation(ctx context.Context, rack string, op api.PendingOperation) (api.PendingOperation, error) {
	return callKey[api.PendingOperation](ctx, c, http.MethodPost, op, api.KindRacks, rack, "operations")
}

// ReleaseRackOperations stores the handed-over operations once and releases the rack's queue.
func (c *Client) ReleaseRackOperations(ctx context.Context, rack string, rel api.OperationsRelease) ([]api.PendingOperation, error) {
	return callKey[[]api.PendingOperation](ctx, c, http.MethodPost, rel, api.KindRacks, rack, "operations", "release")
}
