package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

// TestMachineAddressIsUnique: no write gives a machine an address another machine holds,
// however it is spelled (create, replace, import of a migration), and a refused write changes
// nothing; a machine keeps its own address through every write, and a freed address is free.
func TestMachineAddressIsUnique(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t)
	holder := api.Machine{Name: "holder", Address: "10.0.0.5"}
	mustCreate(t, s, api.KindMachines, &holder)
	v6 := api.Machine{Name: "v6", Address: "2001:db8::1"}
	mustCreate(t, s, api.KindMachines, &v6)
	other := api.Machine{Name: "other", Address: "10.0.0.6"}
	mustCreate(t, s, api.KindMachines, &other)

	refused := func(what string, write func() error, want string) {
		t.Helper()
		before := snapshot(t, s)
		err := write()
		if !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: %v, want a conflict naming %q", what, err, want)
		}
		if snapshot(t, s) != before {
			t.Fatalf("%s: the refused write changed the database", what)
		}
	}
	holds := fmt.Sprintf("machine holder (%s)", holder.Uuid)
	refused("create", func() error {
		return s.Create(ctx, alice, api.KindMachines, &api.Machine{Name: "dup", Address: "10.0.0.5"})
	}, holds)
	refused("create, spelled otherwise", func() error {
		return s.Create(ctx, alice, api.KindMachines, &api.Machine{Name: "dup", Address: "2001:DB8:0::1"})
	}, fmt.Sprintf("machine v6 (%s)", v6.Uuid))
	readdressed := other
	readdressed.Address = "10.0.0.5"
	refused("replace", func() error { return s.Replace(ctx, alice, api.KindMachines, other.Uuid, &readdressed) }, holds)
	bundle := api.Bundle{Machine: api.Machine{Uuid: "0d000000-0000-4000-8000-000000000009", Name: "moved", Address: "10.0.0.5"}}
	refused("import", func() error {
		_, err := s.Import(ctx, ticketUse("t-address"), bundle, drp2)
		return err
	}, holds)

	// A machine's own address is no clash, and an address its holder gave up is free.
	holder.Description = "still 10.0.0.5"
	if err := s.Replace(ctx, alice, api.KindMachines, holder.Uuid, &holder); err != nil {
		t.Fatalf("replace keeping the address: %v", err)
	}
	holder.Address = "10.0.0.7"
	if err := s.Replace(ctx, alice, api.KindMachines, holder.Uuid, &holder); err != nil {
		t.Fatalf("readdress: %v", err)
	}
	if err := s.Replace(ctx, alice, api.KindMachines, other.Uuid, &readdressed); err != nil {
		t.Fatalf("take the freed address: %v", err)
	}
}

// TestMachineAddressFollowsMoves: a machine's inactive imported copy and its migrated stub
// are the one row of its UUID, so it migrates away and back over its stub with its address,
// while the stub and the copy keep other machines off that address.
func TestMachineAddressFollowsMoves(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, dst := newRegion(t), newRegion(t)
	m := api.Machine{Name: "mover", Address: "10.0.0.5", HardwareAddrs: []string{"52:54:00:00:00:05"}}
	mustCreate(t, src.s, api.KindMachines, &m)
	const mig = "migrate-machine/mover"
	if _, err := src.s.Quiesce(ctx, alice, m.Uuid, mig); err != nil {
		t.Fatal(err)
	}
	bundle, err := src.s.Export(ctx, m.Uuid)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dst.s.Import(ctx, ticketUse("away"), bundle, drp2); err != nil {
		t.Fatalf("import on the target: %v", err)
	}
	if _, err := dst.s.Import(ctx, ticketUse("away"), bundle, drp2); err != nil {
		t.Fatalf("retried import over the inactive copy: %v", err)
	}
	if _, err := src.s.FinalizeMigration(ctx, alice, m.Uuid, drp2); err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]region{"the stub": src, "the inactive copy": dst} {
		err := r.s.Create(ctx, alice, api.KindMachines, &api.Machine{Name: "squatter", Address: "10.0.0.5"})
		if !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "machine mover") {
			t.Errorf("a machine created on the address of %s: %v, want a conflict naming mover", name, err)
		}
	}
	if _, err := dst.s.Activate(ctx, alice, m.Uuid); err != nil {
		t.Fatal(err)
	}
	back, err := dst.s.Export(ctx, m.Uuid)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := src.s.Import(ctx, ticketUse("back"), back, "https://drp1:8092"); err != nil || got.Address != "10.0.0.5" {
		t.Fatalf("import back over the stub: %+v, %v", got, err)
	}
}

// TestConcurrentWritesOfOneAddress: of machines created at once with the same address, one
// gets it and every other write is refused.
func TestConcurrentWritesOfOneAddress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t)
	errs := concurrently(8, func(i int) error {
		return s.Create(ctx, alice, api.KindMachines, &api.Machine{Name: fmt.Sprintf("m%d", i), Address: "10.0.0.5"})
	})
	created := 0
	for i, err := range errs {
		switch {
		case err == nil:
			created++
		case !errors.Is(err, store.ErrConflict):
			t.Errorf("writer %d: %v, want a conflict", i, err)
		}
	}
	if created != 1 {
		t.Fatalf("%d machines created with one address, want 1", created)
	}
}

// concurrently runs fn(0) to fn(n-1) at once and returns their errors by i.
func concurrently(n int, fn func(i int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = fn(i) })
	}
	wg.Wait()
	return errs
}
