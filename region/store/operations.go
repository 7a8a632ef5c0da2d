package store

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/region/api"
)

// operationsKind is the audit event Kind of queued operations.
const operationsKind = "operations"

// QueueOperation stores an operation for a paused rack or machine; op gets its ID and Created.
func (s *Store) QueueOperation(ctx context.Context, by Principal, op *api.PendingOperation) error {
	return s.tx(ctx, func(tx pgx.Tx) error { return insertOperation(ctx, tx, by, op) })
}

// insertOperation is QueueOperation inside tx; by, the authenticated caller, is recorded as
// the operation's QueuedBy and QueuedRole.
func insertOperation(ctx context.Context, tx pgx.Tx, by Principal, op *api.PendingOperation) error {
	target := op.Target
	if err := canonUUID("pending operation", "Target", &target, false); err != nil {
		return err
	}
	if op.Kind == "" {
		return invalidf("pending operation for %s has no Kind", target)
	}
	payload := op.Payload
	if payload == nil {
		payload = map[string]any{}
	}
	stored := api.PendingOperation{Target: target, Kind: op.Kind, Payload: payload, QueuedBy: by.User, QueuedRole: by.Role}
	if err := tx.QueryRow(ctx, "INSERT INTO pending_operations (target, kind, payload, queued_by, queued_role) VALUES ($1, $2, $3, $4, $5) RETURNING id, created",
		target, op.Kind, payload, by.User, by.Role).Scan(&stored.ID, &stored.Created); err != nil {
		return err
	}
	if err := recordEvent(ctx, tx, by, "queue", operationsKind, target, map[string]any{"ID": stored.ID, "Kind": op.Kind}); err != nil {
		return err
	}
	*op = stored
	return nil
}

// PendingOperations lists the unreleased operations queued for target (every target when
// target is ""), oldest first.
func (s *Store) PendingOperations(ctx context.Context, target string) ([]api.PendingOperation, error) {
	w := &where{}
	w.add("NOT released")
	if target != "" {
		if err := canonUUID("pending operations", "target", &target, false); err != nil {
			return nil, err
		}
		w.add("target = $1", target)
	}
	ops, err := scanOperations(s.pool.Query(ctx, "SELECT "+operationColumns+" FROM pending_operations"+w.sql()+" ORDER BY id", w.args...))
	return ops, classify(err)
}
