package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

// closedRun and nextRun are two runs of rack-a's transfer workflow east→west.
var (
	closedRun = api.RackHold{Transfer: "transfer-rack/" + rackA, Run: "run-1", From: "east", To: "west"}
	nextRun   = api.RackHold{Transfer: "transfer-rack/" + rackA, Run: "run-2", From: "east", To: "west"}
)

func as(h api.RackHold, role string) api.RackHold {
	h.Role = role
	return h
}

// A pause records the run that holds the rack; the same run may pause again (the copy names
// the target), another run is refused until the first one's hold is recovered, and the end
// of the pause drops the hold.
func TestPauseRackRecordsItsTransfer(t *testing.T) {
	s, _ := newStore(t)
	ctx := store.AsMove(context.Background()) // the move's calls, as the workers make them
	rackFixtures(t, s)
	first := closedRun
	first.To = ""
	r, err := s.PauseRack(ctx, alice, rackA, first)
	if err != nil || api.RackHoldOf(r) != as(first, api.TransferSource) {
		t.Fatalf("PauseRack: hold %+v, %v", api.RackHoldOf(r), err)
	}
	if r, err = s.PauseRack(ctx, alice, rackA, closedRun); err != nil || api.RackHoldOf(r) != as(closedRun, api.TransferSource) {
		t.Fatalf("the same run naming the target: hold %+v, %v", api.RackHoldOf(r), err)
	}
	before := snapshotOf(t, s, "racks")
	_, err = s.PauseRack(ctx, alice, rackA, nextRun)
	wantErr(t, err, store.ErrConflict, "paused by transfer transfer-rack/"+rackA+" (run run-1")
	if snapshotOf(t, s, "racks") != before {
		t.Error("a refused pause changed the rack")
	}
	if r, err = s.RackHeartbeat(ctx, rackA, api.RackHeartbeat{}); err != nil || api.RackHoldOf(r) != as(closedRun, api.TransferSource) {
		t.Errorf("a heartbeat kept hold %+v, %v", api.RackHoldOf(r), err)
	}
	if cfg, _, err := s.RackConfig(ctx, rackA); err != nil || !api.RackHoldOf(cfg.Rack).IsZero() {
		t.Errorf("the rack's config carries the hold %+v (%v): it would change with every transfer", api.RackHoldOf(cfg.Rack), err)
	}
	if r, err = s.UnpauseRack(ctx, alice, rackA); err != nil || !api.RackHoldOf(r).IsZero() || r.Meta[api.MetaTransferRun] != "" {
		t.Errorf("unpaused rack keeps its hold: %+v, %v", r.Meta, err)
	}
}

// The recovery of a closed run's hold: the source's pause ends, the target's copy is deleted
// or, for a finished move, the source hands the rack over; each writes a transfer-recovered
// event; a second recovery does nothing, and a rack another run holds is refused.
func TestRecoverRackTransfer(t *testing.T) {
	ctx := store.AsMove(context.Background())
	rec := func(hold api.RackHold, action, outcome string) api.RackRecovery {
		return api.RackRecovery{Hold: hold, Action: action, Outcome: outcome, RecoveredBy: "transfer-rack/" + rackA + " run run-2", StartedBy: "alice"}
	}
	src, _ := newStore(t)
	dst, _ := newStore(t)
	rackFixtures(t, src)
	if _, err := src.PauseRack(ctx, alice, rackA, closedRun); err != nil {
		t.Fatal(err)
	}
	b, err := src.ExportRack(ctx, rackA)
	if err != nil {
		t.Fatal(err)
	}
	b.Hold = &closedRun
	if _, err := dst.ImportRack(ctx, alice, b); err != nil {
		t.Fatal(err)
	}
	var copied api.Rack
	if err := dst.Get(ctx, api.KindRacks, rackA, &copied); err != nil || api.RackHoldOf(copied) != as(closedRun, api.TransferTarget) {
		t.Fatalf("the copy's hold %+v (%v), want the target's", api.RackHoldOf(copied), err)
	}

	_, err = dst.RecoverRackTransfer(ctx, alice, rackA, rec(as(nextRun, api.TransferTarget), api.RecoverDeleteCopy, api.RecoveryUndone))
	wantErr(t, err, store.ErrConflict, "not by run run-2")
	_, err = dst.RecoverRackTransfer(ctx, alice, rackA, rec(as(closedRun, api.TransferTarget), "explode", api.RecoveryUndone))
	wantErr(t, err, store.ErrInvalid, "unknown recovery action")

	for i, want := range []bool{true, false} { // the second time, nothing is left
		got, err := dst.RecoverRackTransfer(ctx, alice, rackA, rec(as(closedRun, api.TransferTarget), api.RecoverDeleteCopy, api.RecoveryUndone))
		if err != nil || got.Done != want {
			t.Fatalf("delete-copy #%d: %+v, %v; want Done=%v", i+1, got, err, want)
		}
		got, err = src.RecoverRackTransfer(ctx, alice, rackA, rec(as(closedRun, api.TransferSource), api.RecoverUnpause, api.RecoveryUndone))
		if err != nil || got.Done != want {
			t.Fatalf("unpause #%d: %+v, %v; want Done=%v", i+1, got, err, want)
		}
	}
	for _, gone := range []struct{ kind, key string }{{api.KindRacks, rackA}, {api.KindVLANs, vlan1}, {api.KindSubnets, subnet1}, {api.KindPods, pod1}} {
		if err := getAny(ctx, dst, gone.kind, gone.key); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s %s on the target after the recovery: %v", gone.kind, gone.key, err)
		}
	}
	var rack api.Rack
	if err := src.Get(ctx, api.KindRacks, rackA, &rack); err != nil || rack.Status == api.RackPaused || !api.RackHoldOf(rack).IsZero() {
		t.Errorf("source rack %+v (%v): want unpaused, no hold", rack, err)
	}
	for name, s := range map[string]*store.Store{"source": src, "target": dst} {
		all, err := s.Events(ctx, store.ListOptions{Filters: map[string]string{"Kind": api.KindRacks, "Key": rackA}})
		var events []api.Event
		for _, e := range all {
			if e.Action == "transfer-recovered" {
				events = append(events, e)
			}
		}
		if err != nil || len(events) != 1 || events[0].Details["Run"] != "run-1" || events[0].Details["StartedBy"] != "alice" || events[0].Details["Outcome"] != api.RecoveryUndone {
			t.Errorf("%s: transfer-recovered events %+v, %v", name, events, err)
		}
	}

	// A finished move: the source hands the rack over.
	if _, err := src.PauseRack(ctx, alice, rackA, nextRun); err != nil {
		t.Fatal(err)
	}
	if got, err := src.RecoverRackTransfer(ctx, alice, rackA, rec(as(nextRun, api.TransferSource), api.RecoverHandOver, api.RecoveryFinished)); err != nil || !got.Done {
		t.Fatalf("hand-over: %+v, %v", got, err)
	}
	if err := getAny(ctx, src, api.KindRacks, rackA); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("rack on the source after a recovered hand-over: %v", err)
	}
}
