package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/region/api"
)

// Writes queued for a paused rack (region/api/queue.go): what ties a write to a rack, the
// dry run that validates it before it is queued, and the settling of its replay.

// ErrDryRun is what a write made under DryRun returns instead of committing: it would have
// succeeded.
var ErrDryRun = errors.New("dry run: the write would succeed; nothing was stored")

type dryRunKey struct{}

// DryRun makes every write of the store under ctx check everything it would check, then roll
// back and return ErrDryRun.
func DryRun(ctx context.Context) context.Context { return context.WithValue(ctx, dryRunKey{}, true) }

func isDryRun(ctx context.Context) bool { return ctx.Value(dryRunKey{}) != nil }

// RackRefs are the objects a write touches, by what ties each to a rack: racks themselves,
// machines (Rack), VLANs (primary and secondary rack) and subnets (their VLAN's racks).
type RackRefs struct {
	Racks, Machines, VLANs, Subnets []string
}

// AnyRackPaused reports whether any rack of the region is paused: one cheap query that spares
// every other write the lookups PausedRack needs.
func (s *Store) AnyRackPaused(ctx context.Context) (bool, error) {
	var paused bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM racks WHERE doc->>'Status' = $1)`, api.RackPaused).Scan(&paused)
	return paused, classify(err)
}

// PausedRack returns the paused rack that refs tie a write to (the first by name when
// several are), and false when none is. Values that are not UUIDs tie to nothing.
func (s *Store) PausedRack(ctx context.Context, refs RackRefs) (api.Rack, bool, error) {
	ids := func(values []string) []string {
		out := []string{}
		for _, v := range values {
			if id, err := uuid.Parse(v); err == nil {
				out = append(out, id.String())
			}
		}
		return out
	}
	rackIDs, machineIDs, vlanIDs, subnetIDs := ids(refs.Racks), ids(refs.Machines), ids(refs.VLANs), ids(refs.Subnets)
	if len(rackIDs)+len(machineIDs)+len(vlanIDs)+len(subnetIDs) == 0 {
		return api.Rack{}, false, nil
	}
	rows, err := racks.selectRows(ctx, s.pool, rackWhere(`doc->>'Status' = $1 AND uuid::text IN (
		SELECT unnest($2::text[])
		UNION SELECT doc->>'Rack' FROM machines WHERE uuid = ANY($3::uuid[])
		UNION SELECT unnest(ARRAY[primary_rack::text, secondary_rack::text]) FROM vlans WHERE uuid = ANY($4::uuid[])
		UNION SELECT unnest(ARRAY[v.primary_rack::text, v.secondary_rack::text]) FROM subnets sn JOIN vlans v ON v.uuid = sn.vlan WHERE sn.uuid = ANY($5::uuid[]))`,
		api.RackPaused, rackIDs, machineIDs, vlanIDs, subnetIDs), " LIMIT 1")
	if err != nil || len(rows) == 0 {
		return api.Rack{}, false, classify(err)
	}
	return *rows[0].obj, true, nil
}

// RackOperation returns operation id of the rack, released or not.
func (s *Store) RackOperation(ctx context.Context, rackUUID string, id int64) (api.PendingOperation, error) {
	if err := canonUUID("rack", "Uuid", &rackUUID, false); err != nil {
		return api.PendingOperation{}, err
	}
	ops, err := scanOperations(s.pool.Query(ctx, "SELECT "+operationColumns+" FROM pending_operations WHERE id = $2 AND "+rackOpsWhere, rackUUID, id))
	if err != nil {
		return api.PendingOperation{}, classify(err)
	}
	if len(ops) == 0 {
		return api.PendingOperation{}, notFoundf("rack %s has no operation %d", rackUUID, id)
	}
	return ops[0], nil
}

// replayLock is the first key of the pg_advisory_lock pairs that serialise the replays of one
// rack's queued writes ("repl"); the second is the hash of the rack's UUID.
const replayLock int32 = 0x7265706c

// SerialReplay runs fn while no other region process (nor another request of this one)
// replays the rack's queued writes, so that they run in order even when a request that ends
// the pause is retried while the first still replays.
func (s *Store) SerialReplay(ctx context.Context, rackUUID string, fn func() error) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return classify(fmt.Errorf("acquire connection for the replay lock: %w", err))
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1, hashtext($2))", replayLock, rackUUID); err != nil {
		return classify(fmt.Errorf("take the replay lock of rack %s: %w", rackUUID, err))
	}
	defer func() {
		// As migrateSchema: closing the connection ends its session and lock if unlocking fails.
		if _, err := conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1, hashtext($2))", replayLock, rackUUID); err != nil {
			conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()
	return fn()
}

// UnsettledWrites lists the queued writes of the rack that are to be replayed here, oldest
// first: none while the rack is paused or absent here.
func (s *Store) UnsettledWrites(ctx context.Context, rackUUID string) ([]api.PendingOperation, error) {
	if err := canonUUID("rack", "Uuid", &rackUUID, false); err != nil {
		return nil, err
	}
	ops, err := scanOperations(s.pool.Query(ctx, "SELECT "+operationColumns+` FROM pending_operations
		WHERE kind = $2 AND done IS NULL AND target = $1::uuid
		AND EXISTS (SELECT 1 FROM racks WHERE uuid = $1::uuid AND doc->>'Status' <> $3)
		ORDER BY id`, rackUUID, api.OperationWrite, api.RackPaused))
	return ops, classify(err)
}

// ClaimWrite marks the queued write id released and being replayed, so that no other region
// process replays it too; false when it was settled already. A write whose replay is cut
// short by a crash stays OutcomeReplaying: it is never replayed twice.
func (s *Store) ClaimWrite(ctx context.Context, id int64) (bool, error) {
	tag, err := s.pool.Exec(ctx, "UPDATE pending_operations SET released = true, done = now(), outcome = $2 WHERE id = $1 AND kind = $3 AND done IS NULL",
		id, api.OutcomeReplaying, api.OperationWrite)
	if err != nil {
		return false, classify(err)
	}
	return tag.RowsAffected() == 1, nil
}

// SettleWrite records how the replay of the claimed write op ended and audits it as a
// "replay" of the operations kind; details say what was answered.
func (s *Store) SettleWrite(ctx context.Context, by Principal, op api.PendingOperation, outcome string, details map[string]any) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "UPDATE pending_operations SET done = now(), outcome = $2 WHERE id = $1", op.ID, outcome); err != nil {
			return err
		}
		details["ID"], details["Outcome"] = op.ID, outcome
		return recordEvent(ctx, tx, by, "replay", operationsKind, op.Target, details)
	})
}

// settleHandedOver settles the queued writes among released as handed over when the rack is
// no longer here: the source releases its queue after the hand-over, and the writes run on
// the target, so they must never run here, even should the rack come back.
func settleHandedOver(ctx context.Context, tx pgx.Tx, rackUUID string, released []api.PendingOperation) error {
	ids := []int64{}
	for _, op := range released {
		if op.Kind == api.OperationWrite {
			ids = append(ids, op.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `UPDATE pending_operations SET done = now(), outcome = $3
		WHERE id = ANY($2::bigint[]) AND done IS NULL AND NOT EXISTS (SELECT 1 FROM racks WHERE uuid = $1::uuid)`,
		rackUUID, ids, api.OutcomeHandedOver)
	return err
}

// dropQueuedWrites settles the writes queued here for the copy of a rack whose import is
// undone: what they touched is gone with the copy, and they must not run should the rack
// come here again later.
func dropQueuedWrites(ctx context.Context, tx pgx.Tx, by Principal, rackUUID string) error {
	ids, err := queryStrings(ctx, tx, `UPDATE pending_operations SET released = true, done = now(), outcome = $3
		WHERE target = $1::uuid AND kind = $2 AND done IS NULL RETURNING id::text`, rackUUID, api.OperationWrite, api.OutcomeDropped)
	if err != nil || len(ids) == 0 {
		return err
	}
	return recordEvent(ctx, tx, by, "drop", operationsKind, rackUUID, map[string]any{"IDs": ids, "Outcome": api.OutcomeDropped})
}
