package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
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

// TestWriteQueuedDuringRackTransfer makes ordinary API writes to a machine behind rack-a
// while an operator holds its transfer (the pause Update) with the rack paused on region-a:
// both are answered 202 (the CLI exits 0 and says so), neither is applied on region-a, and
// once the transfer is resumed and finished each is applied on region-b exactly once.
func TestWriteQueuedDuringRackTransfer(t *testing.T) {
	s := startStack(t, dev.StackOptions{Seed: true, RunWorker: true})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	a, b := regionClient(s, "region-a"), regionClient(s, "region-b")
	rack := s.Racks["rack-a"]
	if err := s.WaitRackOnline(ctx, rack.Name); err != nil {
		t.Fatal(err)
	}
	machines, err := a.Machines().List(ctx, url.Values{"Rack": {rack.Uuid}})
	if err != nil || len(machines) != dev.RackMachines {
		t.Fatalf("%d machines behind rack-a (%v), want %d", len(machines), err, dev.RackMachines)
	}
	m := machines[0]
	jobsBefore, err := a.Jobs().List(ctx, url.Values{"Machine": {m.Uuid}})
	if err != nil {
		t.Fatal(err)
	}

	in := workflows.TransferRackInput{SourceRegion: "region-a", TargetRegion: "region-b", Rack: rack.Uuid}
	in.Grant = grant(ctx, t, s, in.SourceRegion, api.GrantRequest{Kind: api.GrantRack, Key: rack.Uuid, TargetRegion: in.TargetRegion})
	id := workflows.TransferRackID(rack.Uuid)
	// Started paused, in one request: the run moves no machine before the writes are made.
	start := s.Client.NewWithStartWorkflowOperation(client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL}, workflows.TransferRack, in)
	pause, err := s.Client.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{UpdateName: workflows.PauseUpdate, Args: []any{workflows.ControlRequest{By: "test"}}, WaitForStage: client.WorkflowUpdateStageCompleted}})
	if err != nil {
		t.Fatal(err)
	}
	if err := pause.Get(ctx, nil); err != nil {
		t.Fatalf("pause: %v", err)
	}
	run, err := start.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 2*time.Minute, "the transfer held by its pause at the machines, rack-a paused on region-a", func() (bool, error) {
		v, err := s.Client.QueryWorkflow(ctx, id, "", workflows.ProgressQuery)
		if err != nil {
			return false, err
		}
		var p workflows.TransferProgress
		if err := v.Get(&p); err != nil || !p.Paused || p.Phase != workflows.PhaseMigratingMachines {
			return false, err
		}
		r, err := a.Racks().Get(ctx, rack.Uuid)
		return r.Status == api.RackPaused, err
	})

	// The CLI: a machine update is queued, said so, and exits 0.
	out, err := runCLIAs(t, s, s.AdminToken, "-E", s.Regions["region-a"].URL, "machines", "update", m.Uuid, `{"Description": "written during the transfer"}`)
	if err != nil || !strings.Contains(out, "queued until the rack transfer of rack-a") || !strings.Contains(out, "operation ") {
		t.Fatalf("machines update during the transfer: %v: %q; want exit 0 naming the queued operation", err, out)
	}
	// The client: a new job for the machine is queued too.
	_, err = a.Jobs().Create(ctx, api.Job{Machine: m.Uuid})
	var queued *regionclient.QueuedError
	if !errors.As(err, &queued) || queued.Queued.Rack != rack.Uuid || queued.Queued.Transfer.Transfer != id {
		t.Fatalf("job for %s during the transfer: %v; want it queued for transfer %s", m.Name, err, id)
	}
	now, err := a.Machines().Get(ctx, m.Uuid)
	if err != nil || now.Description != m.Description {
		t.Fatalf("machine on region-a while queued: %+v, %v; want it unchanged", now, err)
	}
	if jobs, err := a.Jobs().List(ctx, url.Values{"Machine": {m.Uuid}}); err != nil || len(jobs) != len(jobsBefore) {
		t.Fatalf("jobs of %s on region-a while queued: %d (%v), want %d", m.Name, len(jobs), err, len(jobsBefore))
	}

	if out, err := runCLIAs(t, s, s.AdminToken, "-E", s.Regions["region-a"].URL, "migrations", "resume", id); err != nil {
		t.Fatalf("migrations resume: %v: %s", err, out)
	}
	var res workflows.TransferRackResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatalf("transfer failed: %v", err)
	}
	if res.Released != 2 {
		t.Errorf("transfer released %d operations, want the 2 queued writes", res.Released)
	}
	moved, err := b.Machines().Get(ctx, m.Uuid)
	if err != nil || moved.Description != "written during the transfer" {
		t.Errorf("machine on region-b: Description %q (%v), want the queued write applied", moved.Description, err)
	}
	jobs, err := b.Jobs().List(ctx, url.Values{"Machine": {m.Uuid}})
	if err != nil || len(jobs) != len(jobsBefore)+1 {
		t.Errorf("jobs of %s on region-b: %d (%v), want the %d it had and the queued one, once", m.Name, len(jobs), err, len(jobsBefore))
	}
	left, err := a.RackOperation(ctx, rack.Uuid, queued.Queued.Operation.ID)
	if err != nil || left.Outcome != api.OutcomeHandedOver {
		t.Errorf("the job's operation on region-a: %+v (%v), want it handed over", left, err)
	}
	// The operation the CLI named, as the CLI shows it.
	var n int64
	if _, err := fmt.Sscanf(out[strings.Index(out, "operation "):], "operation %d", &n); err != nil {
		t.Fatalf("no operation ID in %q: %v", out, err)
	}
	shown, err := runCLIAs(t, s, s.AdminToken, "-E", s.Regions["region-a"].URL, "racks", "operations", rack.Uuid, strconv.FormatInt(n, 10), "-o", "json")
	var op api.PendingOperation
	if err != nil || json.Unmarshal([]byte(shown), &op) != nil || op.ID != n || op.Outcome != api.OutcomeHandedOver || op.Payload["Method"] != "PATCH" {
		t.Errorf("racks operations %s %d on region-a: %v: %s; want the PATCH, handed over", rack.Uuid, n, err, shown)
	}
	events, err := b.Events(ctx, url.Values{"Kind": {"operations"}, "Key": {rack.Uuid}})
	if err != nil {
		t.Fatal(err)
	}
	var replays []string
	for _, ev := range events {
		if ev.Action == "replay" {
			replays = append(replays, ev.Details["Outcome"].(string))
		}
	}
	if len(replays) != 2 || replays[0] != api.OutcomeApplied || replays[1] != api.OutcomeApplied {
		t.Errorf("replays on region-b: %v, want the 2 writes applied", replays)
	}
}
