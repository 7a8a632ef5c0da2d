package store_test

import (
	"context"
	"testing"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

// An operator's control of a move is in the region's audit log under the move's workflow ID,
// with who asked and the window set; a malformed one is refused and records nothing.
func TestRecordMoveControl(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	id := "bulk-migrate/nightly"
	for _, bad := range []struct {
		c    api.MoveControl
		want string
	}{
		{api.MoveControl{Migration: id, Action: "stop", By: "bob"}, `Action "stop" is not pause, resume or set-window`},
		{api.MoveControl{Migration: id, Action: "set-window", By: "bob"}, "Window 0: a positive window goes with set-window only"},
		{api.MoveControl{Migration: id, Action: "pause", Window: 3, By: "bob"}, "Window 3: a positive window goes with set-window only"},
		{api.MoveControl{Action: "pause"}, "Migration is empty; By is empty"},
	} {
		wantErr(t, s.RecordMoveControl(ctx, alice, bad.c), store.ErrInvalid, bad.want)
	}
	for _, c := range []api.MoveControl{{Migration: id, Action: "pause", By: "bob"}, {Migration: id, Action: "set-window", Window: 7, By: "carol"}} {
		if err := s.RecordMoveControl(ctx, alice, c); err != nil {
			t.Fatal(err)
		}
	}
	events, err := s.Events(ctx, store.ListOptions{Filters: map[string]string{"Kind": api.KindMoveControls, "Key": id}})
	if err != nil || len(events) != 2 {
		t.Fatalf("events %+v, %v; want the two controls", events, err)
	}
	window, pause := events[0], events[1] // newest first
	if pause.Action != "move-pause" || pause.Actor != alice.User || pause.Details["By"] != "bob" || pause.Details["Window"] != nil {
		t.Errorf("pause event %+v", pause)
	}
	if window.Action != "move-set-window" || window.Details["By"] != "carol" || window.Details["Window"] != float64(7) {
		t.Errorf("set-window event %+v", window)
	}
}
