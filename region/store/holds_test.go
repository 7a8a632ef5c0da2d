package store_test

import (
	"context"
	"testing"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

// deleteRefused checks that deleting key on r is refused with a 409 naming the holding
// migration, with and without force and for another migration, and that nothing changed.
func deleteRefused(t *testing.T, r region, key, holder string) {
	t.Helper()
	ctx := context.Background()
	before := snapshot(t, r.s)
	for _, c := range []struct {
		ctx   context.Context
		force bool
	}{{ctx, false}, {ctx, true}, {store.ForMigration(ctx, "migrate-machine/someone-else"), false}} {
		err := r.s.Delete(c.ctx, alice, api.KindMachines, key, c.force)
		wantErr(t, err, store.ErrConflict, "is held by migration "+holder)
	}
	if snapshot(t, r.s) != before {
		t.Fatal("a refused delete changed the database")
	}
}

// TestDeleteGuardHoldsMigratingMachine: from quiesce to activation, the machine on the source
// and its imported copy on the destination can only be deleted by naming their migration
// (else a DELETE mid-migration could lose the machine on both regions).
func TestDeleteGuardHoldsMigratingMachine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, birdy, _ := seedSource(t)
	dst := seedDestination(t)
	id := birdy.Uuid

	if _, err := src.s.Quiesce(ctx, alice, id, migration); err != nil {
		t.Fatal(err)
	}
	deleteRefused(t, src, id, migration)
	bundle, err := src.s.Export(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	use := ticketUse("held")
	use.Migration = migration
	if _, err := dst.s.Import(ctx, use, bundle, drp2); err != nil {
		t.Fatal(err)
	}
	deleteRefused(t, dst, id, migration)
	if _, err := src.s.FinalizeMigration(ctx, alice, id, drp2); err != nil {
		t.Fatal(err)
	}
	deleteRefused(t, src, "Name:"+birdy.Name, migration) // the stub RestoreMigration needs

	// The migration's own compensation names itself; the ticket dies with the copy.
	if err := dst.s.Delete(store.ForMigration(ctx, migration), alice, api.KindMachines, id, false); err != nil {
		t.Fatalf("the migration deleting its own copy: %v", err)
	}
	_, err = dst.s.Import(ctx, use, bundle, drp2)
	wantErr(t, err, store.ErrConflict, "a ticket imports once")

	// An import that did not name its migration holds the copy too, named by its ticket.
	if _, err := dst.s.Import(ctx, ticketUse("anonymous"), bundle, drp2); err != nil {
		t.Fatal(err)
	}
	deleteRefused(t, dst, id, "the import of ticket anonymous")
	if _, err := dst.s.Activate(ctx, alice, id); err != nil {
		t.Fatal(err)
	}
	if err := dst.s.Delete(ctx, alice, api.KindMachines, id, false); err != nil {
		t.Fatalf("an activated machine is held by nothing: %v", err)
	}
}

// TestTicketDiesAtActivation: a ticket's import may be retried while it is in flight, but once
// the machine was activated a replay with a different Secret is refused and changes nothing
// (else a replay could replace the machine's agent secret on the destination).
func TestTicketDiesAtActivation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, birdy, _ := seedSource(t)
	dst := seedDestination(t)
	id := birdy.Uuid
	bundle, err := src.s.Export(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	use := ticketUse("once")
	use.Migration = migration
	for attempt := range 2 { // the caller lost the first answer: the retry is the same import
		if _, err := dst.s.Import(ctx, use, bundle, drp2); err != nil {
			t.Fatalf("import attempt %d: %v", attempt+1, err)
		}
	}
	if _, err := dst.s.Activate(ctx, alice, id); err != nil {
		t.Fatal(err)
	}
	// An operator takes the machine out of service: it is not an import in flight again.
	m := dst.machine(id)
	m.Runnable = false
	if err := dst.s.Replace(ctx, alice, api.KindMachines, id, &m); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dst.s)
	replay := bundle
	replay.Machine.Secret = "attacker-chosen"
	_, err = dst.s.Import(ctx, use, replay, drp2)
	wantErr(t, err, store.ErrConflict, "a ticket imports once")
	if snapshot(t, dst.s) != before || dst.machine(id).Secret != bundle.Machine.Secret {
		t.Fatal("a replayed ticket changed the destination")
	}
	// Nor does a fresh ticket pass the stopped machine off as an earlier inactive import.
	_, err = dst.s.Import(ctx, ticketUse("fresh"), replay, drp2)
	wantErr(t, err, store.ErrConflict, "neither a migrated stub nor an inactive earlier import")
}
