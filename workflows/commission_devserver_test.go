package workflows_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	rackacts "github.com/ironflow/ironflow/activities/rack"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/workers"
	"github.com/ironflow/ironflow/workflows"
)

// commissionHistoryDir holds the recorded CommissionMachine histories.
var commissionHistoryDir = filepath.Join("testdata", "commission")

// TestCommissionMachineOnDevServer runs CommissionMachine on a real Temporal server, the main
// worker as `ironflow worker` wires it and fakes of the rack's activities on the rack's own
// task queue: a machine that enlists, and one that never boots within its Timeout. With
// -record it writes the histories for TestReplayCommissionHistories.
func TestCommissionMachineOnDevServer(t *testing.T) {
	c := devServer(t)
	main := workers.NewMigrationWorker(c, nil)
	if err := main.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(main.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, s := range []struct {
		history   string
		bootPolls int
		timeout   time.Duration
		status    string
	}{
		{"commission_machine_history.json", 1, 0, api.StatusReady},
		{"commission_machine_timeout_history.json", -1, 2 * time.Second, api.StatusFailedCommissioning},
	} {
		r := newCommissionRack(s.bootPolls)
		rack := worker.New(c, rackacts.TaskQueue(podRackUUID), worker.Options{})
		rack.RegisterActivity(r)
		if err := rack.Start(); err != nil {
			t.Fatal(err)
		}
		in := commissionInput()
		in.Timeout = s.timeout
		run, err := c.ExecuteWorkflow(ctx, workflows.PodStartOptions(workflows.CommissionMachineID(commissionedMachine)), workflows.CommissionMachine, in)
		if err != nil {
			t.Fatal(err)
		}
		var res workflows.CommissionMachineResult
		err = run.Get(ctx, &res)
		rack.Stop()
		var app *temporal.ApplicationError
		switch {
		case s.status == api.StatusReady && err != nil:
			t.Fatalf("%s: %v", s.history, err)
		case s.status != api.StatusReady && (!errors.As(err, &app) || app.Type() != workflows.ErrTypeCommissionTimeout):
			t.Fatalf("%s: error %v, want %s", s.history, err, workflows.ErrTypeCommissionTimeout)
		}
		if r.status != s.status || r.power != api.PowerStateOff {
			t.Errorf("%s: machine %q (%q), power %s; want %q, off", s.history, r.status, r.reason, r.power, s.status)
		}
		if who := startedBy(ctx, t, c, run); who != "alice" {
			t.Errorf("%s: StartedBy memo %q, want the grant's user", s.history, who)
		}
		if *record {
			writeHistory(ctx, t, c, run, filepath.Join(commissionHistoryDir, s.history))
		}
	}
}

// TestReplayCommissionHistories replays the recorded CommissionMachine histories against the
// current code.
func TestReplayCommissionHistories(t *testing.T) {
	replayDir(t, commissionHistoryDir, 2, "go test ./workflows -run CommissionMachineOnDevServer -record", workflows.CommissionMachine)
}
