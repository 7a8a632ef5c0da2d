package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

// queueWrite pauses rack-a and queues a write for it as by, and returns the operation.
func queueWrite(t *testing.T, s *store.Store, by store.Principal) api.PendingOperation {
	t.Helper()
	ctx := context.Background()
	if _, err := s.PauseRack(ctx, alice, rackA, api.RackHold{}); err != nil {
		t.Fatal(err)
	}
	op := api.PendingOperation{Target: rackA, Kind: api.OperationWrite, Payload: map[string]any{"Method": "POST", "Path": "/api/v1/jobs", "Body": "{}"}}
	if err := s.QueueRackOperation(ctx, by, rackA, &op); err != nil {
		t.Fatal(err)
	}
	return op
}

// A replayed write settles its operation in its own transaction, so the same operation never
// stores twice: a second replay of it rolls back with ErrReplayed.
func TestReplayedWriteStoresOnce(t *testing.T) {
	s, _ := newStore(t)
	rackFixtures(t, s)
	bob := store.Principal{User: "bob", Role: api.RoleOperator}
	op := queueWrite(t, s, bob)
	if op.QueuedBy != "bob" || op.QueuedRole != api.RoleOperator {
		t.Fatalf("queued as %q/%q, want the caller bob/operator", op.QueuedBy, op.QueuedRole)
	}
	ctx := context.Background()
	var stored []api.Job
	for i, want := range []error{nil, store.ErrReplayed} {
		rctx, rp := store.Replaying(ctx, op, bob, map[string]any{"Method": "POST"}, nil)
		err := s.Create(rctx, bob, api.KindJobs, &api.Job{Machine: mach2})
		if !errors.Is(err, want) {
			t.Fatalf("replay %d: %v, want %v", i+1, err, want)
		}
		if rp.Applied != (want == nil) || rp.Earlier != (want != nil) {
			t.Errorf("replay %d: Applied %v, Earlier %v", i+1, rp.Applied, rp.Earlier)
		}
	}
	if err := s.List(ctx, api.KindJobs, store.ListOptions{Filters: map[string]string{"Machine": mach2}}, &stored); err != nil || len(stored) != 1 {
		t.Errorf("jobs of %s: %d (%v), want the replayed one once", mach2, len(stored), err)
	}
	got, err := s.RackOperation(ctx, rackA, op.ID)
	if err != nil || got.Outcome != api.OutcomeApplied || got.Done == nil || !got.Released {
		t.Errorf("operation after the replays: %+v, %v", got, err)
	}
}

// Operations queued before callers were recorded take the actor of their "queue" audit event
// as QueuedBy, never the User a payload names, and lose User and Role from their payload.
func TestQueuedWritesBeforeCallersTakeTheirQueueEventsActor(t *testing.T) {
	s, url := newStore(t)
	rackFixtures(t, s)
	op := queueWrite(t, s, store.Principal{User: "bob", Role: api.RoleOperator})
	ctx := context.Background()
	// As the payload and columns were before migration 0082: a forged principal in the payload.
	for _, sql := range []string{
		"UPDATE pending_operations SET payload = payload || '{\"User\": \"admin\", \"Role\": \"admin\"}'",
		"ALTER TABLE pending_operations DROP COLUMN queued_by, DROP COLUMN queued_role",
		"DROP INDEX pending_operations_unsettled_writes",
		"DELETE FROM schema_migrations WHERE version = 82",
	} {
		if _, err := s.DB().Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	s.Close()
	reopened, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reopened.Close)
	got, err := reopened.RackOperation(ctx, rackA, op.ID)
	if err != nil || got.QueuedBy != "bob" || got.QueuedRole != "" || got.Payload["User"] != nil || got.Payload["Role"] != nil {
		t.Errorf("operation after the migration: %+v, %v; want bob's with no role (the payload named another user), the payload naming no one", got, err)
	}
}
