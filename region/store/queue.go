package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

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
	return s.unsettledWrites(ctx, rackUUID, "AND EXISTS (SELECT 1 FROM racks WHERE uuid = $1::uuid AND doc->>'Status' <> $3)", api.RackPaused)
}

// RacksWithLeftWrites lists the racks, not paused, that have queued writes not settled: a
// replay was cut short there after their pause ended.
func (s *Store) RacksWithLeftWrites(ctx context.Context) ([]string, error) {
	ids, err := queryStrings(ctx, s.pool, `SELECT DISTINCT p.target::text FROM pending_operations p JOIN racks r ON r.uuid = p.target
		WHERE p.kind = $1 AND p.done IS NULL AND r.doc->>'Status' <> $2 ORDER BY 1`, api.OperationWrite, api.RackPaused)
	return ids, classify(err)
}

// UnsettledWritesFor lists the writes queued for the rack and not settled yet, oldest first,
// paused or not.
func (s *Store) UnsettledWritesFor(ctx context.Context, rackUUID string) ([]api.PendingOperation, error) {
	return s.unsettledWrites(ctx, rackUUID, "")
}

func (s *Store) unsettledWrites(ctx context.Context, rackUUID, cond string, args ...any) ([]api.PendingOperation, error) {
	if err := canonUUID("rack", "Uuid", &rackUUID, false); err != nil {
		return nil, err
	}
	ops, err := scanOperations(s.pool.Query(ctx, "SELECT "+operationColumns+` FROM pending_operations
		WHERE kind = $2 AND done IS NULL AND target = $1::uuid `+cond+` ORDER BY id`, append([]any{rackUUID, api.OperationWrite}, args...)...))
	return ops, classify(err)
}

// ClaimWrite marks the queued write id released and being replayed (OutcomeReplaying), and
// false when it was settled already. It settles nothing: a replay cut short by a crash leaves
// the write unsettled, and the next replay runs it again (at least once); the write's own
// transaction settles it (Replaying), so it is applied at most once.
func (s *Store) ClaimWrite(ctx context.Context, id int64) (bool, error) {
	tag, err := s.pool.Exec(ctx, "UPDATE pending_operations SET released = true, outcome = $2 WHERE id = $1 AND kind = $3 AND done IS NULL",
		id, api.OutcomeReplaying, api.OperationWrite)
	if err != nil {
		return false, classify(err)
	}
	return tag.RowsAffected() == 1, nil
}

// ErrReplayed is what the write of a replay returns, rolled back, when its queued write was
// settled by an earlier replay: it ran already.
var ErrReplayed = errors.New("the queued write was replayed already; nothing was stored")

// Replay is the replay of one queued write, as by; Replaying attaches it to a context.
type Replay struct {
	op      api.PendingOperation
	by      Principal
	details map[string]any
	base    *ObjectBase
	// Applied: the write's transaction committed and settled the operation as applied.
	// Earlier: an earlier replay had settled it; this one stored nothing.
	Applied, Earlier bool
}

// ObjectBase is what a queued PUT or PATCH expects of its object: Fields fingerprinted
// (Fingerprints) as they were when it was queued.
type ObjectBase struct {
	Kind, Key string
	Fields    map[string]string
}

type replayKey struct{}

// Replaying makes the first write transaction of the store under the returned context settle
// op as applied, audited as a "replay" by by with details, in that same transaction: the
// operation's ID is the write's idempotency key. Should op have been settled meanwhile, that
// transaction rolls back with ErrReplayed. With a base, that transaction first locks the
// object and refuses (ErrConflict) when a field of base has another value now, so that the
// write never overwrites a newer change.
func Replaying(ctx context.Context, op api.PendingOperation, by Principal, details map[string]any, base *ObjectBase) (context.Context, *Replay) {
	rp := &Replay{op: op, by: by, details: details, base: base}
	return context.WithValue(ctx, replayKey{}, rp), rp
}

// checkBase refuses, inside the write's transaction tx, a write whose object changed in a
// field it sets since it was queued; an object gone is the write's to answer.
func (rp *Replay) checkBase(ctx context.Context, tx pgx.Tx) error {
	if rp.base == nil || len(rp.base.Fields) == 0 {
		return nil
	}
	k, err := lookup(rp.base.Kind)
	if err != nil {
		return err
	}
	obj, err := k.locked(ctx, tx, rp.base.Key)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	now, err := Fingerprints(obj, slices.Collect(maps.Keys(rp.base.Fields)))
	if err != nil {
		return err
	}
	var changed []string
	for f, sum := range rp.base.Fields {
		if now[f] != sum {
			changed = append(changed, f)
		}
	}
	if len(changed) == 0 {
		return nil
	}
	slices.Sort(changed)
	return conflictf("%s %s changed since the write was queued (%s); it was not applied, so as not to overwrite the newer value",
		strings.TrimSuffix(rp.base.Kind, "s"), rp.base.Key, strings.Join(changed, ", "))
}

// Fingerprints maps each of fields to the hex SHA-256 of its JSON value in obj, an API object
// (null when absent): what a queued write records of the fields it sets
// (api.WriteRequest.Base), and what its replay compares.
func Fingerprints(obj any, fields []string) (map[string]string, error) {
	doc, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode object: %w", err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(doc, &top); err != nil {
		return nil, fmt.Errorf("decode object: %w", err)
	}
	out := make(map[string]string, len(fields))
	for _, f := range fields {
		v, ok := top[f]
		if !ok {
			v = json.RawMessage("null")
		}
		sum := sha256.Sum256(v)
		out[f] = hex.EncodeToString(sum[:])
	}
	return out, nil
}

func replayOf(ctx context.Context) *Replay {
	rp, _ := ctx.Value(replayKey{}).(*Replay)
	return rp
}

// settle settles rp's operation as applied inside tx, the write's own transaction.
func (rp *Replay) settle(ctx context.Context, tx pgx.Tx) error {
	tag, err := tx.Exec(ctx, "UPDATE pending_operations SET released = true, done = now(), outcome = $2 WHERE id = $1 AND done IS NULL", rp.op.ID, api.OutcomeApplied)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		rp.Earlier = true
		return ErrReplayed
	}
	return recordEvent(ctx, tx, rp.by, "replay", operationsKind, rp.op.Target, rp.eventDetails(api.OutcomeApplied))
}

func (rp *Replay) eventDetails(outcome string) map[string]any {
	details := maps.Clone(rp.details)
	details["ID"], details["Outcome"] = rp.op.ID, outcome
	return details
}

// SettleWrite records how the replay rp ended when its write did not settle it (it was
// refused, or stored nothing), and audits it as a "replay" of the operations kind; a write
// settled meanwhile is left as it is. An applied write that was queued again elsewhere only
// has its outcome say so.
func (s *Store) SettleWrite(ctx context.Context, rp *Replay, outcome string) error {
	if rp.Earlier {
		return nil
	}
	if rp.Applied {
		_, err := s.pool.Exec(ctx, "UPDATE pending_operations SET outcome = $2 WHERE id = $1", rp.op.ID, outcome)
		return classify(err)
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "UPDATE pending_operations SET done = now(), outcome = $2 WHERE id = $1 AND done IS NULL", rp.op.ID, outcome)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		return recordEvent(ctx, tx, rp.by, "replay", operationsKind, rp.op.Target, rp.eventDetails(outcome))
	})
}

// Caller returns the principal a write queued by queued is replayed as now: the user as this
// region knows it at this moment, with the role queued narrowed to the user's current role,
// or ErrUnauthorized when the user does not exist here (deleted since, or unknown to the
// region the write was handed over to) or no role was recorded.
func (s *Store) Caller(ctx context.Context, queued Principal) (Principal, error) {
	if queued.User == "" || queued.Role == "" {
		return Principal{}, classed(ErrUnauthorized, "the write has no recorded caller")
	}
	var role string
	err := s.pool.QueryRow(ctx, "SELECT role FROM users WHERE name = $1", queued.User).Scan(&role)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Principal{}, classed(ErrUnauthorized, "user %s, who queued the write, does not exist on this region", queued.User)
	case err != nil:
		return Principal{}, classify(err)
	}
	if rank(role) > rank(queued.Role) {
		queued.Role = role
	}
	return queued, nil
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
