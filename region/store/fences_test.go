package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

// attemptAt is a context of migration's attempt n, started after base.
func attemptAt(n int32, after time.Duration) context.Context {
	base := time.Date(2026, 3, 1, 12, 0, 0, 987654321, time.UTC)
	ctx := store.ForMigration(context.Background(), migration)
	return store.ForAttempt(ctx, api.Attempt{Started: base.Add(after), Number: n})
}

// fenceRow is the fence PostgreSQL holds for machine, "" when none.
func fenceRow(t *testing.T, s *store.Store, machine string) string {
	t.Helper()
	var row string
	err := s.DB().QueryRow(context.Background(),
		"SELECT coalesce((SELECT migration || ' ' || attempt || ' ' || attempt_started FROM migration_fences WHERE machine = $1::uuid), '')", machine).Scan(&row)
	if err != nil {
		t.Fatal(err)
	}
	return row
}

// TestStaleAttemptRefused: once an attempt acted on a machine for its migration, a step of an
// older attempt is refused with ErrStaleAttempt (a conflict) naming both attempts and changes
// nothing; the fence is in PostgreSQL, outlives the hold it was taken with, and an operator's
// delete takes it with the machine.
func TestStaleAttemptRefused(t *testing.T) {
	t.Parallel()
	src, birdy, _ := seedSource(t)
	id := birdy.Uuid
	first, second := attemptAt(1, 0), attemptAt(2, 5*time.Minute)

	if _, err := src.s.Quiesce(first, alice, id, migration); err != nil {
		t.Fatal(err)
	}
	if _, err := src.s.Quiesce(second, alice, id, migration); err != nil {
		t.Fatalf("the newer attempt quiescing again: %v", err)
	}
	if got := fenceRow(t, src.s, id); got != migration+" 2 "+"1772366700987654321" {
		t.Fatalf("fence in PostgreSQL: %q, want the second attempt", got)
	}
	before := snapshot(t, src.s)
	_, err := src.s.Unquiesce(first, alice, id)
	wantErr(t, err, store.ErrStaleAttempt, "attempt 2@2026-03-01T12:05:00.987654321Z of migration "+migration+" has acted on it; this step of the older attempt 1@")
	if !errors.Is(err, store.ErrConflict) {
		t.Errorf("a stale attempt's refusal %v is no conflict", err)
	}
	if _, err := src.s.FinalizeMigration(first, alice, id, drp2); !errors.Is(err, store.ErrStaleAttempt) {
		t.Errorf("the older attempt's finalize: %v", err)
	}
	if snapshot(t, src.s) != before {
		t.Fatal("a stale attempt's step changed the database")
	}

	// The newer attempt undoes the quiesce: the hold ends, the fence stays, and the older
	// attempt's quiesce landing late holds nothing.
	if _, err := src.s.Unquiesce(second, alice, id); err != nil {
		t.Fatal(err)
	}
	if _, err := src.s.Quiesce(first, alice, id, migration); !errors.Is(err, store.ErrStaleAttempt) {
		t.Fatalf("the older attempt's quiesce after the hold ended: %v", err)
	}
	if m := src.machine(id); !m.Runnable || m.Meta[api.MetaMigrating] != "" {
		t.Fatalf("machine after the stale quiesce: %+v", m)
	}
	if err := src.s.Delete(context.Background(), alice, api.KindMachines, id, false); err != nil {
		t.Fatal(err)
	}
	if got := fenceRow(t, src.s, id); got != "" {
		t.Errorf("an operator's delete left the fence %q", got)
	}
}

// TestStaleImportAfterUndoneCopy: the newer attempt's delete of its copy keeps the fence, so an
// older attempt's import landing after it does not bring the copy back; imports of two
// attempts racing leave the newer one's fence.
func TestStaleImportAfterUndoneCopy(t *testing.T) {
	t.Parallel()
	src, birdy, _ := seedSource(t)
	dst := seedDestination(t)
	id := birdy.Uuid
	if _, err := src.s.Quiesce(context.Background(), alice, id, migration); err != nil {
		t.Fatal(err)
	}
	bundle, err := src.s.Export(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	use := ticketUse("fenced")
	use.Migration = migration
	first, second := attemptAt(1, 0), attemptAt(2, 5*time.Minute)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, ctx := range []context.Context{first, second} {
		wg.Go(func() { _, errs[i] = dst.s.Import(ctx, use, bundle, drp2) })
	}
	wg.Wait()
	if errs[1] != nil || errs[0] != nil && !errors.Is(errs[0], store.ErrStaleAttempt) {
		t.Fatalf("racing imports: first attempt %v, second %v", errs[0], errs[1])
	}
	if got := fenceRow(t, dst.s, id); got != migration+" 2 1772366700987654321" {
		t.Fatalf("fence after the racing imports: %q, want the second attempt", got)
	}
	if err := dst.s.Delete(second, alice, api.KindMachines, id, false); err != nil {
		t.Fatalf("the newer attempt deleting its copy: %v", err)
	}
	if _, err := dst.s.Import(first, use, bundle, drp2); !errors.Is(err, store.ErrStaleAttempt) {
		t.Fatalf("the older attempt's import after the copy was undone: %v", err)
	}
	var m api.Machine
	if err := dst.s.Get(context.Background(), api.KindMachines, id, &m); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the copy after the stale import: %+v, %v", m, err)
	}
}
