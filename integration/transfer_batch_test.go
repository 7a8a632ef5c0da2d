package integration

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/dev"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/workflows"
)

// TestTransferRackCancelledMidBatch cancels a rack transfer while its batches move machines:
// every machine ends live on exactly one region (moved, or undone and live on region-a again),
// none is left held by the batch, and region-b keeps no inactive copy.
func TestTransferRackCancelledMidBatch(t *testing.T) {
	s := startStack(t, dev.StackOptions{Seed: true, RunWorker: true})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	a, b := regionClient(s, "region-a"), regionClient(s, "region-b")
	rack := s.Racks["rack-a"]
	if err := s.WaitRackOnline(ctx, rack.Name); err != nil {
		t.Fatal(err)
	}
	for i := range 176 { // 200 machines behind the rack with the seed's
		m := api.Machine{Name: fmt.Sprintf("cancel-%03d", i), Runnable: true, Available: true, Rack: rack.Uuid,
			HardwareAddrs: []string{fmt.Sprintf("52:54:02:00:%02x:%02x", i>>8, i&0xff)}, Meta: map[string]string{}}
		if _, err := a.Machines().Create(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	machines, err := a.Machines().List(ctx, url.Values{"Rack": {rack.Uuid}})
	if err != nil || len(machines) != 200 {
		t.Fatalf("%d machines behind rack-a (%v), want 200", len(machines), err)
	}

	in := workflows.TransferRackInput{SourceRegion: "region-a", TargetRegion: "region-b", Rack: rack.Uuid}
	in.Grant = grant(ctx, t, s, in.SourceRegion, api.GrantRequest{Kind: api.GrantRack, Key: rack.Uuid, TargetRegion: in.TargetRegion})
	run, err := s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.TransferRackID(rack.Uuid), TaskQueue: workflows.TaskQueue}, workflows.TransferRack, in)
	if err != nil {
		t.Fatal(err)
	}
	// Cancel once the first machines are live on region-b: the batches are mid-way.
	pollUntil(t, 2*time.Minute, "a machine live on region-b", func() (bool, error) {
		moved, err := b.Machines().List(ctx, url.Values{"Rack": {rack.Uuid}, "Runnable": {"true"}})
		return len(moved) > 0, err
	})
	if err := s.Client.CancelWorkflow(ctx, run.GetID(), ""); err != nil {
		t.Fatal(err)
	}
	err = run.Get(ctx, nil)
	var canceled *temporal.CanceledError
	if !errors.As(err, &canceled) {
		t.Fatalf("transfer after cancel: %v, want canceled", err)
	}

	onA, onB := map[string]api.Machine{}, map[string]api.Machine{}
	for c, into := range map[string]map[string]api.Machine{"region-a": onA, "region-b": onB} {
		list, err := regionClient(s, c).Machines().List(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range list {
			into[m.Uuid] = m
		}
	}
	live := func(m api.Machine, ok bool) bool {
		return ok && m.Runnable && !m.Locked && m.Meta[api.MetaRedirectEndpoint] == "" && m.Meta[api.MetaMigrating] == ""
	}
	moved := 0
	for _, m := range machines {
		ma, okA := onA[m.Uuid]
		mb, okB := onB[m.Uuid]
		switch {
		case live(ma, okA) == live(mb, okB):
			t.Errorf("machine %s: live on region-a %v, on region-b %v (a: %+v; b: %+v)", m.Name, live(ma, okA), live(mb, okB), ma.Meta, mb.Meta)
		case live(mb, okB):
			moved++
			if !ma.Locked || ma.Meta[api.MetaRedirectEndpoint] != s.Regions["region-b"].URL {
				t.Errorf("machine %s moved, but region-a keeps %+v, not its stub", m.Name, ma)
			}
		case okB && !mb.Locked:
			t.Errorf("machine %s undone, but region-b keeps a copy: %+v", m.Name, mb)
		}
	}
	if moved == 0 || moved == len(machines) {
		t.Errorf("%d of %d machines moved: the cancel did not land mid-transfer", moved, len(machines))
	}
	t.Logf("cancelled with %d of %d machines moved; every machine live on exactly one region", moved, len(machines))
}
