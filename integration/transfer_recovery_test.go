package integration

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/dev"
	"github.com/ironflow/ironflow/region/api"
	regionclient "github.com/ironflow/ironflow/region/client"
	"github.com/ironflow/ironflow/workflows"
)

// TestTerminatedTransferIsRecovered: a TransferRack terminated after its copy (which runs
// none of its undos) leaves rack-a paused on region-a and its copy on region-b, both holding
// the run. `ironflow racks recover` is refused while the transfer runs; after it ends it
// deletes the copy and ends the pause, each region auditing it, and a second recover finds
// nothing. Terminated again, the next transfer of the rack recovers the leftover itself and
// completes.
func TestTerminatedTransferIsRecovered(t *testing.T) {
	s := startStack(t, dev.StackOptions{Seed: true, RunWorker: true})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	a, b := regionClient(s, "region-a"), regionClient(s, "region-b")
	rack := s.Racks["rack-a"].Uuid
	pollUntil(t, 30*time.Second, "rack-a online on region-a", func() (bool, error) {
		r, err := a.Racks().Get(ctx, rack)
		return r.Status == api.RackOnline, err
	})
	machines, err := a.Machines().List(ctx, url.Values{"Rack": {rack}})
	if err != nil {
		t.Fatal(err)
	}
	// On the batched path a rack's machines move in seconds. One machine whose agent has
	// checked in takes the per-machine path and waits for its agent at the target, which
	// never comes: that holds the transfer in its machine phase for the termination.
	waiting := machines[0].Uuid
	// The test stands in for the agent's check-in, which the agent API applies whatever the
	// rack's pause; an ordinary write to a machine of a paused rack would wait for its end.
	agent := regionclient.New(s.Regions["region-a"].URL, s.AdminToken, regionclient.AsMove())
	setAgentSeen := func(seen string) {
		t.Helper()
		patch, _ := json.Marshal(map[string]any{"Meta": map[string]any{api.MetaAgentLastSeen: seen}})
		if _, err := agent.Machines().Patch(ctx, waiting, patch); err != nil {
			t.Fatal(err)
		}
	}
	setAgentSeen(time.Now().UTC().Format(time.RFC3339))
	recoverCLI := func() (string, error) {
		return runCLIAs(t, s, s.AdminToken, "-E", s.Regions["region-a"].URL, "racks", "recover", "rack-a", "-o", "json")
	}

	run := terminatedTransfer(ctx, t, s, rack, machines, func() {
		if out, err := recoverCLI(); err == nil || !strings.Contains(out, "is still running") {
			t.Errorf("racks recover while the transfer runs: %v, %q; want it refused", err, out)
		}
	})
	held, err := a.Racks().Get(ctx, rack)
	if err != nil || held.Status != api.RackPaused || held.Meta[api.MetaTransferRun] != run.GetRunID() {
		t.Fatalf("rack-a on region-a after the termination: %+v (%v); want paused, held by run %s", held, err, run.GetRunID())
	}
	if copied, err := b.Racks().Get(ctx, rack); err != nil || api.RackHoldOf(copied).Role != api.TransferTarget {
		t.Fatalf("the copy of rack-a on region-b after the termination: %+v (%v)", copied, err)
	}

	out, err := recoverCLI()
	if err != nil {
		t.Fatalf("racks recover: %v\n%s", err, out)
	}
	var res workflows.RecoverRackResult
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &res); err != nil {
		t.Fatalf("racks recover printed %q: %v", out, err)
	}
	if len(res.Recovered) != 1 || res.Recovered[0].Run != run.GetRunID() || res.Recovered[0].Outcome != api.RecoveryUndone {
		t.Errorf("recovered %+v, want run %s undone", res.Recovered, run.GetRunID())
	}
	pollUntil(t, 30*time.Second, "rack-a online on region-a, held by nothing", func() (bool, error) {
		r, err := a.Racks().Get(ctx, rack)
		return r.Status == api.RackOnline && api.RackHoldOf(r).IsZero(), err
	})
	assertGone(t, "the copy of rack-a on region-b", func() error { _, err := b.Racks().Get(ctx, rack); return err })
	for name, c := range map[string]*regionclient.Client{"region-a": a, "region-b": b} {
		if !hasEvent(ctx, t, c, rack, "transfer-recovered", run.GetRunID()) {
			t.Errorf("%s has no transfer-recovered event for run %s", name, run.GetRunID())
		}
	}
	if out, err := recoverCLI(); err != nil || !strings.Contains(out, "nothing to recover") {
		t.Errorf("a second recover: %v, %q; want nothing to recover", err, out)
	}

	second := terminatedTransfer(ctx, t, s, rack, machines, nil)
	setAgentSeen("") // the third transfer moves every machine on the batched path
	in := workflows.TransferRackInput{SourceRegion: "region-a", TargetRegion: "region-b", Rack: rack}
	in.Grant = grant(ctx, t, s, in.SourceRegion, api.GrantRequest{Kind: api.GrantRack, Key: rack, TargetRegion: in.TargetRegion})
	third, err := s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.TransferRackID(rack), TaskQueue: workflows.TaskQueue}, workflows.TransferRack, in)
	if err != nil {
		t.Fatal(err)
	}
	if err := third.Get(ctx, nil); err != nil {
		t.Fatalf("the transfer after a terminated one: %v", err)
	}
	pollUntil(t, 30*time.Second, "rack-a online on region-b", func() (bool, error) {
		r, err := b.Racks().Get(ctx, rack)
		return r.Status == api.RackOnline && api.RackHoldOf(r).IsZero(), err
	})
	assertGone(t, "rack-a on region-a", func() error { _, err := a.Racks().Get(ctx, rack); return err })
	if !hasEvent(ctx, t, b, rack, "transfer-recovered", second.GetRunID()) {
		t.Errorf("region-b has no transfer-recovered event for the second run %s", second.GetRunID())
	}
	for _, m := range machines {
		assertActiveOnExactlyOne(ctx, t, s, m.Uuid, "region-b")
	}
}

// terminatedTransfer starts a transfer of rack region-a→region-b, calls whileRunning (if
// any) once it migrates machines (its copy is done) and machines[0] waits in its own
// migration, terminates it and waits for the
// machine migrations it started, which are cancelled and undo themselves.
func terminatedTransfer(ctx context.Context, t *testing.T, s *dev.Stack, rack string, machines []api.Machine, whileRunning func()) client.WorkflowRun {
	t.Helper()
	in := workflows.TransferRackInput{SourceRegion: "region-a", TargetRegion: "region-b", Rack: rack, Window: 1}
	in.Grant = grant(ctx, t, s, in.SourceRegion, api.GrantRequest{Kind: api.GrantRack, Key: rack, TargetRegion: in.TargetRegion})
	run, err := s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.TransferRackID(rack), TaskQueue: workflows.TaskQueue}, workflows.TransferRack, in)
	if err != nil {
		t.Fatal(err)
	}
	waitForPhase(ctx, t, s, run.GetID(), workflows.PhaseMigratingMachines)
	pollUntil(t, 2*time.Minute, "a machine's own migration running", func() (bool, error) {
		d, err := s.Client.DescribeWorkflowExecution(ctx, workflows.MigrateMachineID(machines[0].Uuid), "")
		if err != nil {
			return false, nil // not started yet
		}
		return d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
	})
	if whileRunning != nil {
		whileRunning()
	}
	if err := s.Client.TerminateWorkflow(ctx, run.GetID(), run.GetRunID(), "test: stop without cleanup"); err != nil {
		t.Fatal(err)
	}
	for _, m := range machines {
		pollUntil(t, 2*time.Minute, "the migration of "+m.Name+" ended", func() (bool, error) {
			d, err := s.Client.DescribeWorkflowExecution(ctx, workflows.MigrateMachineID(m.Uuid), "")
			if err != nil {
				return strings.Contains(err.Error(), "not found"), nil
			}
			return d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
		})
	}
	return run
}

// hasEvent reports whether region c audited action on rack for the transfer run.
func hasEvent(ctx context.Context, t *testing.T, c *regionclient.Client, rack, action, run string) bool {
	t.Helper()
	events, err := c.Events(ctx, url.Values{"Kind": {api.KindRacks}, "Key": {rack}})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if e.Action == action && e.Details["Run"] == run {
			return true
		}
	}
	return false
}
