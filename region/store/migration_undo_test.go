package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

// The undo of an import whose agent may have moved: the inactive copy becomes a locked stub
// redirecting to the source, with its jobs archived; a later import replaces it. Only the
// migration that holds the copy may undo it. An active machine, or one never imported, is
// refused and left as it was.
func TestRedirectCopy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, birdy, _ := seedSource(t)
	id := birdy.Uuid
	if _, err := src.s.Quiesce(ctx, alice, id, migration); err != nil {
		t.Fatal(err)
	}
	bundle, err := src.s.Export(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	dst := seedDestination(t)
	use := ticketUse("undo")
	use.Migration = migration
	if _, err := dst.s.Import(ctx, use, bundle, drp2); err != nil {
		t.Fatal(err)
	}
	const source = "https://drp1:8092"
	_, err = dst.s.RedirectCopy(ctx, alice, id, source)
	wantErr(t, err, store.ErrConflict, "is held by migration "+migration)
	if m := dst.machine(id); m.Locked || m.Meta[api.MetaRedirectEndpoint] != "" {
		t.Fatalf("a refused RedirectCopy changed the copy: %+v", m)
	}
	ctx = store.ForMigration(ctx, migration)
	if _, err := dst.s.RedirectCopy(ctx, alice, id, "not a url"); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("bad endpoint: %v", err)
	}
	stub, err := dst.s.RedirectCopy(ctx, alice, id, source)
	if err != nil {
		t.Fatal(err)
	}
	if !stub.Locked || stub.Runnable || stub.Meta[api.MetaRedirectEndpoint] != source || len(stub.Profiles) != 0 {
		t.Fatalf("copy after RedirectCopy: %+v", stub)
	}
	for _, j := range dst.jobs(id) {
		if !j.Archived || j.Meta[api.MetaRedirectEndpoint] != source {
			t.Errorf("job %s after RedirectCopy: archived %v, meta %v", j.Uuid, j.Archived, j.Meta)
		}
	}
	if again, err := dst.s.RedirectCopy(ctx, alice, id, source); err != nil || again.Meta[api.MetaRedirectEndpoint] != source {
		t.Fatalf("RedirectCopy again: %+v, %v", again, err)
	}
	if _, err := dst.s.RedirectCopy(ctx, alice, id, "https://elsewhere:8092"); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("redirect elsewhere: %v, want a conflict", err)
	}
	// The undone import is over, as when its copy is deleted: its ticket imports nothing again.
	_, err = dst.s.Import(ctx, use, bundle, drp2)
	wantErr(t, err, store.ErrConflict, "a ticket imports once")
	// The machine's next move (its workflow ID is the machine's) imports over the stub.
	next := ticketUse("undo-2")
	next.Migration = migration
	if m, err := dst.s.Import(ctx, next, bundle, drp2); err != nil || m.Locked || m.Meta[api.MetaRedirectEndpoint] != "" {
		t.Fatalf("import over the redirecting stub: %+v, %v", m, err)
	}
	if _, err := dst.s.Activate(ctx, alice, id); err != nil {
		t.Fatal(err)
	}
	if _, err := dst.s.RedirectCopy(ctx, alice, id, source); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("redirect of an active machine: %v, want a conflict", err)
	}
	// The source's own machine was never imported there.
	if _, err := src.s.Unquiesce(ctx, alice, id); err != nil {
		t.Fatal(err)
	}
	inactive := src.machine(id)
	inactive.Runnable = false
	if err := src.s.Replace(ctx, alice, api.KindMachines, id, &inactive); err != nil {
		t.Fatal(err)
	}
	if _, err := src.s.RedirectCopy(ctx, alice, id, drp2); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("redirect of a machine never imported: %v, want a conflict", err)
	}
	if m := src.machine(id); m.Locked || m.Meta[api.MetaRedirectEndpoint] != "" {
		t.Errorf("refused RedirectCopy changed the machine: %+v", m)
	}
}
