package integration

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/dev"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/tickets"
	"github.com/ironflow/ironflow/workflows"
	"github.com/ironflow/ironflow/workflows/moves"
)

// The operator's controls of a running move on the real stack (regions, Temporal dev server,
// worker), across continue-as-new: two machines a batch, four a run, so the move continues as
// new several times before and after the controls land.
const (
	controlsMachinesPerBatch = 2
	controlsBatchesPerRun    = 2
	// controlsGrantTTL is long enough for the move to start under its grant, which then
	// expires while the move is paused: the move still finishes (GrantCheck.Move).
	controlsGrantTTL = 20 * time.Second
)

// moveState is what the controls test reads of a move's progress query.
type moveState struct {
	Done, Running, Window int
	Paused                bool
}

// TestTransferRackControlsAcrossContinueAsNew pauses, re-windows and resumes a running rack
// transfer of the seed's rack-a once it has continued as new; its grant expires during the
// pause, and the transfer still finishes.
func TestTransferRackControlsAcrossContinueAsNew(t *testing.T) {
	s := startStack(t, dev.StackOptions{Seed: true, RunWorker: true})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rack := s.Racks["rack-a"]
	if err := s.WaitRackOnline(ctx, rack.Name); err != nil {
		t.Fatal(err)
	}
	machines, err := regionClient(s, "region-a").Machines().List(ctx, url.Values{"Rack": {rack.Uuid}})
	if err != nil || len(machines) < 12 {
		t.Fatalf("%d machines behind rack-a (%v), want at least 12", len(machines), err)
	}
	in := workflows.TransferRackInput{SourceRegion: "region-a", TargetRegion: "region-b", Rack: rack.Uuid, Window: 1,
		MachinesPerBatch: controlsMachinesPerBatch, BatchesPerRun: controlsBatchesPerRun}
	in.Grant = grant(ctx, t, s, in.SourceRegion, api.GrantRequest{Kind: api.GrantRack, Key: rack.Uuid, TargetRegion: in.TargetRegion, TTL: controlsGrantTTL})
	run, err := s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.TransferRackID(rack.Uuid), TaskQueue: workflows.TaskQueue}, workflows.TransferRack, in)
	if err != nil {
		t.Fatal(err)
	}
	exerciseControls(ctx, t, s, run, in.Grant, len(machines), func() (moveState, error) {
		var p workflows.TransferProgress
		v, err := s.Client.QueryWorkflow(ctx, run.GetID(), "", workflows.ProgressQuery)
		if err == nil {
			err = v.Get(&p)
		}
		return moveState{Done: p.MachinesDone, Running: p.MachinesRunning, Window: p.Window, Paused: p.Paused}, err
	})
	var res workflows.TransferRackResult
	if err := s.Client.GetWorkflow(ctx, run.GetID(), "").Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	for _, m := range machines {
		assertActiveOnExactlyOne(ctx, t, s, m.Uuid, "region-b")
	}
}

// TestBulkMigrateControlsAcrossContinueAsNew pauses, re-windows and resumes a running bulk
// migration of 16 machines once it has continued as new; its grant expires during the pause,
// and the run still finishes.
func TestBulkMigrateControlsAcrossContinueAsNew(t *testing.T) {
	s := startStack(t, dev.StackOptions{RunWorker: true, NoRacks: true})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	a := regionClient(s, "region-a")
	var names []string
	var machines []api.Machine
	for i := range 16 {
		m := api.Machine{Name: fmt.Sprintf("controls-%02d", i), Runnable: true, Available: true,
			HardwareAddrs: []string{fmt.Sprintf("52:54:03:00:00:%02x", i)}, Meta: map[string]string{}}
		m, err := a.Machines().Create(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		names, machines = append(names, m.Name), append(machines, m)
	}
	in := workflows.BulkMigrateInput{SourceRegion: "region-a", TargetRegion: "region-b", Selector: activities.Selector{Names: names}, Window: 1,
		MachinesPerBatch: controlsMachinesPerBatch, MachinesPerRun: controlsMachinesPerBatch * controlsBatchesPerRun}
	in.Grant = grant(ctx, t, s, in.SourceRegion, api.GrantRequest{Kind: api.GrantBulk, Selector: api.GrantSelector{Names: names}, TargetRegion: in.TargetRegion, TTL: controlsGrantTTL})
	run, err := s.Client.ExecuteWorkflow(ctx, workflows.BulkMigrateStartOptions("controls"), workflows.BulkMigrate, in)
	if err != nil {
		t.Fatal(err)
	}
	exerciseControls(ctx, t, s, run, in.Grant, len(machines), func() (moveState, error) {
		var p workflows.BulkProgress
		v, err := s.Client.QueryWorkflow(ctx, run.GetID(), "", workflows.ProgressQuery)
		if err == nil {
			err = v.Get(&p)
		}
		return moveState{Done: p.Done, Running: p.Running, Window: p.Window, Paused: p.Paused}, err
	})
	var res workflows.BulkMigrateResult
	if err := s.Client.GetWorkflow(ctx, run.GetID(), "").Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if res.Migrated != len(machines) || len(res.Failed) != 0 {
		t.Errorf("result: %d succeeded, failed %+v; want all %d", res.Migrated, res.Failed, len(machines))
	}
	for _, m := range machines {
		assertActiveOnExactlyOne(ctx, t, s, m.Uuid, "region-b")
	}
}

// exerciseControls drives the controls of run, a move of total machines at window 1, through
// its progress query: once it has continued as new it pauses it and checks that, once the
// machines in flight have finished, no machine moves (progress and region-b stay put); lets
// the move's grant expire; sets window 4 while paused; resumes it and checks that more
// machines are in flight at once than before, until all have moved.
func exerciseControls(ctx context.Context, t *testing.T, s *dev.Stack, run client.WorkflowRun, grant string, total int, progress func() (moveState, error)) {
	t.Helper()
	claims, err := tickets.ParseGrant(grant)
	if err != nil {
		t.Fatal(err)
	}
	id := run.GetID()
	var st moveState
	maxBefore := 0
	pollUntil(t, 2*time.Minute, "the move to continue as new and go on", func() (bool, error) {
		desc, err := s.Client.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			return false, err
		}
		if st, err = progress(); err != nil {
			return false, err
		}
		maxBefore = max(maxBefore, st.Running)
		return desc.GetWorkflowExecutionInfo().GetExecution().GetRunId() != run.GetRunID() && st.Done > 0, nil
	})
	if st.Done >= total-controlsMachinesPerBatch*controlsBatchesPerRun {
		t.Fatalf("the move got too far (%+v of %d) before it could be paused mid-way", st, total)
	}
	if cs, err := moves.Pause(ctx, s.Client, id, "op"); err != nil || !cs.Paused {
		t.Fatalf("pause: %+v, %v", cs, err)
	}
	pollUntil(t, time.Minute, "the machines in flight at the pause to finish", func() (bool, error) {
		var err error
		st, err = progress()
		return err == nil && st.Paused && st.Running == 0, err
	})
	onB := movedTo(ctx, t, s, "region-b")
	for range 5 {
		time.Sleep(300 * time.Millisecond) // nothing to wait for: checking that nothing happens
		now, err := progress()
		if err != nil {
			t.Fatal(err)
		}
		if now.Done != st.Done || now.Running != 0 || !now.Paused {
			t.Fatalf("paused move went on: %+v, then %+v", st, now)
		}
		if n := movedTo(ctx, t, s, "region-b"); n != onB {
			t.Fatalf("paused move: %d machines live on region-b, then %d", onB, n)
		}
	}
	if st.Done >= total {
		t.Fatalf("every machine moved before the pause: %+v", st)
	}
	pausedAt := st.Done
	expires := time.Unix(claims.Expires, 0)
	pollUntil(t, controlsGrantTTL+time.Minute, "the move's grant to expire", func() (bool, error) {
		return !time.Now().Before(expires), nil
	})
	if cs, err := moves.SetWindow(ctx, s.Client, id, 4, "op"); err != nil || cs != (workflows.ControlState{Paused: true, Window: 4}) {
		t.Fatalf("set-window: %+v, %v", cs, err)
	}
	if now, err := progress(); err != nil || now.Window != 4 || now.Running != 0 {
		t.Fatalf("progress after set-window: %+v, %v", now, err)
	}
	if cs, err := moves.Resume(ctx, s.Client, id, "op"); err != nil || cs.Paused {
		t.Fatalf("resume: %+v, %v", cs, err)
	}
	maxAfter := 0
	pollUntil(t, 2*time.Minute, "every machine to move after the resume", func() (bool, error) {
		var err error
		st, err = progress()
		maxAfter = max(maxAfter, st.Running)
		return err == nil && st.Done == total, err
	})
	if maxBefore > controlsMachinesPerBatch || maxAfter <= maxBefore {
		t.Errorf("at most %d machines in flight at window 1, %d at window 4: want more after set-window", maxBefore, maxAfter)
	}
	t.Logf("paused at %d of %d moved; in flight at most %d at window 1, %d at window 4", pausedAt, total, maxBefore, maxAfter)
}

// movedTo counts the machines live on region: runnable, not a locked stub.
func movedTo(ctx context.Context, t *testing.T, s *dev.Stack, region string) int {
	t.Helper()
	list, err := regionClient(s, region).Machines().List(ctx, url.Values{"Runnable": {"true"}})
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}
