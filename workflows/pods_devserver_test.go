package workflows_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	rackacts "github.com/ironflow/ironflow/activities/rack"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/workers"
	"github.com/ironflow/ironflow/workflows"
)

// podHistoryDir holds the recorded pod workflow histories (the replayer of testdata/*.json
// runs MigrateMachine only).
var podHistoryDir = filepath.Join("testdata", "pods")

// TestPodWorkflowsOnDevServer runs each pod workflow on a real Temporal server: the main
// worker as `ironflow worker` wires it, the pod activities (fakes of the rack's) on the rack's
// own task queue. With -record it writes the histories for TestReplayPodHistories.
func TestPodWorkflowsOnDevServer(t *testing.T) {
	c := devServer(t)
	acts := newPodActs()
	main := workers.NewMigrationWorker(c, nil)
	rack := worker.New(c, rackacts.TaskQueue(podRackUUID), worker.Options{})
	rack.RegisterActivity(acts)
	for _, w := range []worker.Worker{main, rack} {
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	machine := ""
	steps := []struct {
		history string
		id      func() string
		wf      any
		in      func() any
		out     any
		fail    string // activity made to fail
	}{
		{"pod_refresh_history.json", func() string { return workflows.PodRefreshID(podUUID) }, workflows.PodRefresh, func() any { return podTarget() }, &rackacts.PodRefreshResult{}, ""},
		{"pod_compose_history.json", func() string { return workflows.PodComposeID(podUUID, "vm-1") }, workflows.PodCompose, func() any { return composeInput() }, &workflows.PodComposeResult{}, ""},
		{"pod_power_history.json", func() string { return workflows.PodPowerID(machine) }, workflows.PodPower, func() any {
			return workflows.PodPowerInput{PodVMInput: workflows.PodVMInput{PodTarget: podTarget(), Machine: machine}, Action: api.PowerCycle}
		}, &rackacts.PowerVMResult{}, ""},
		{"machine_power_history.json", func() string { return workflows.MachinePowerID(machine) }, workflows.MachinePower, func() any {
			return workflows.MachinePowerInput{Machine: machine, Rack: podRackUUID, Grant: "grant", Action: api.PowerOn}
		}, &rackacts.PowerMachineResult{}, ""},
		{"pod_decompose_history.json", func() string { return workflows.PodDecomposeID(machine) }, workflows.PodDecompose, func() any { return workflows.PodVMInput{PodTarget: podTarget(), Machine: machine} }, nil, ""},
		{"pod_compose_undone_history.json", func() string { return workflows.PodComposeID(podUUID, "vm-1") }, workflows.PodCompose, func() any { return composeInput() }, nil, "DeclareVM"},
	}
	for _, s := range steps {
		acts.fail = map[string]error{}
		if s.fail != "" {
			acts.fail[s.fail] = temporal.NewNonRetryableApplicationError("refused", rackacts.ErrTypeRegionRefused, nil)
		}
		run, err := c.ExecuteWorkflow(ctx, workflows.PodStartOptions(s.id()), s.wf, s.in())
		if err != nil {
			t.Fatal(err)
		}
		err = run.Get(ctx, s.out)
		if (err != nil) != (s.fail != "") {
			t.Fatalf("%s: %v", s.history, err)
		}
		if res, ok := s.out.(*workflows.PodComposeResult); ok {
			machine = res.Machine
		}
		if who := startedBy(ctx, t, c, run); who != "alice" {
			t.Errorf("%s: StartedBy memo %q, want the grant's user", s.history, who)
		}
		if *record {
			// Histories recorded before the own-ID check keep their names: they must still replay.
			writeHistory(ctx, t, c, run, filepath.Join(podHistoryDir, "own_id_"+s.history))
		}
	}
	if len(acts.vms) != 0 || len(acts.machines) != 0 {
		t.Errorf("left after decompose and the undone compose: VMs %v, machines %v", acts.vms, acts.machines)
	}
}

func startedBy(ctx context.Context, t *testing.T, c client.Client, run client.WorkflowRun) string {
	t.Helper()
	desc, err := c.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
	if err != nil {
		t.Fatal(err)
	}
	var who string
	if p := desc.GetWorkflowExecutionInfo().GetMemo().GetFields()[workflows.MemoStartedBy]; p != nil {
		if err := converter.GetDefaultDataConverter().FromPayload(p, &who); err != nil {
			t.Fatal(err)
		}
	}
	return who
}

// TestReplayPodHistories replays the recorded pod workflow histories against the current code.
func TestReplayPodHistories(t *testing.T) {
	replayDir(t, podHistoryDir, 6, "go test ./workflows -run PodWorkflowsOnDevServer -record",
		workflows.PodCompose, workflows.PodDecompose, workflows.PodRefresh, workflows.PodPower, workflows.MachinePower)
}
