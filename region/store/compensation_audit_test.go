package store_test

import (
	"context"
	"testing"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

// An operator's answer to a stuck compensation is in the region's audit log, with who asked,
// why and the undo it was about; a malformed one is refused and records nothing.
func TestRecordCompensationDecision(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	d := api.CompensationDecision{Migration: "migrate-machine/" + mach1, Action: "abandon", Reason: "copy removed by hand", By: "bob", Compensation: "delete-imported-copy"}
	err := s.RecordCompensationDecision(ctx, alice, mach1, api.CompensationDecision{Migration: d.Migration, Action: "shrug", By: "bob"})
	wantErr(t, err, store.ErrInvalid, `Action "shrug" is neither retry nor abandon; Reason is empty`)
	if err := s.RecordCompensationDecision(ctx, alice, mach1, d); err != nil {
		t.Fatal(err)
	}
	events, err := s.Events(ctx, store.ListOptions{Filters: map[string]string{"Kind": api.KindMachines, "Key": mach1}})
	if err != nil || len(events) != 1 {
		t.Fatalf("events %+v, %v; want the one decision", events, err)
	}
	e := events[0]
	if e.Action != "compensation-abandon" || e.Actor != alice.User || e.Details["By"] != "bob" || e.Details["Reason"] != d.Reason || e.Details["Migration"] != d.Migration || e.Details["Compensation"] != d.Compensation {
		t.Errorf("event %+v", e)
	}
}
