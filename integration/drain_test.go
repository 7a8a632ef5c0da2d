package integration

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/dev"
	"github.com/ironflow/ironflow/region/api"
	regionclient "github.com/ironflow/ironflow/region/client"
	"github.com/ironflow/ironflow/workflows"
)

// TestTransferRackDrainsRunningJobs: a job running on a machine behind rack-a holds the
// transfer in its drain step, with nothing moved, until the job ends; a drain that times out
// fails the transfer naming the job, and undoes the pause.
func TestTransferRackDrainsRunningJobs(t *testing.T) {
	s := startStack(t, dev.StackOptions{Seed: true, RunWorker: true})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	a := regionClient(s, "region-a")
	rack := s.Racks["rack-a"]
	if err := s.WaitRackOnline(ctx, rack.Name); err != nil {
		t.Fatal(err)
	}
	machines, job, finishJob := runningJobOnRack(ctx, t, a, s.Regions["region-a"].URL, rack.Uuid, "drain-test-agent-secret")
	transfer := func(wait time.Duration) client.WorkflowRun {
		in := workflows.TransferRackInput{SourceRegion: "region-a", TargetRegion: "region-b", Rack: rack.Uuid, WaitForRunningJob: wait}
		in.Grant = grant(ctx, t, s, in.SourceRegion, api.GrantRequest{Kind: api.GrantRack, Key: rack.Uuid, TargetRegion: in.TargetRegion})
		run, err := s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.TransferRackID(rack.Uuid), TaskQueue: workflows.TaskQueue}, workflows.TransferRack, in)
		if err != nil {
			t.Fatal(err)
		}
		return run
	}

	onB := movedTo(ctx, t, s, "region-b")
	err := transfer(3*time.Second).Get(ctx, nil)
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != activities.ErrTypeJobsRunning || !strings.Contains(appErr.Error(), job.Uuid) {
		t.Fatalf("transfer with a job running past its wait: %v, want %s naming job %s", err, activities.ErrTypeJobsRunning, job.Uuid)
	}
	if r, err := a.Racks().Get(ctx, rack.Uuid); err != nil || r.Status == api.RackPaused {
		t.Errorf("rack-a on region-a after the failed drain: %+v, %v; want its pause undone", r, err)
	}
	if n := movedTo(ctx, t, s, "region-b"); n != onB {
		t.Errorf("%d machines live on region-b after the failed drain, %d before", n, onB)
	}

	run := transfer(2 * time.Minute)
	phase := func() (string, error) {
		var p workflows.TransferProgress
		v, err := s.Client.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), workflows.ProgressQuery)
		if err == nil {
			err = v.Get(&p)
		}
		return p.Phase, err
	}
	pollUntil(t, time.Minute, "the transfer to drain", func() (bool, error) {
		p, err := phase()
		return p == workflows.PhaseDrainingJobs, err
	})
	for range 3 {
		time.Sleep(time.Second) // nothing to wait for: checking that the drain holds
		if p, err := phase(); err != nil || p != workflows.PhaseDrainingJobs {
			t.Fatalf("phase %q (%v) while the job runs, want %s", p, err, workflows.PhaseDrainingJobs)
		}
	}
	finishJob()
	var res workflows.TransferRackResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	for _, m := range machines {
		assertActiveOnExactlyOne(ctx, t, s, m.Uuid, "region-b")
	}
}

// runningJobOnRack starts a running job on the first machine behind rack on the region at
// regionURL (a the region's admin client) and returns the rack's machines, the job and how to
// end it: the way a real job ends, reported by the machine's agent, since an operator's write
// to a machine of a paused rack would be queued until its transfer ends.
func runningJobOnRack(ctx context.Context, t *testing.T, a *regionclient.Client, regionURL, rack, agentSecret string) ([]api.Machine, api.Job, func()) {
	t.Helper()
	machines, err := a.Machines().List(ctx, url.Values{"Rack": {rack}})
	if err != nil || len(machines) == 0 {
		t.Fatalf("%d machines behind rack %s (%v)", len(machines), rack, err)
	}
	job, err := a.Jobs().Create(ctx, api.Job{Machine: machines[0].Uuid, Task: "long-task", State: api.JobRunning})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Machines().Patch(ctx, machines[0].Uuid, json.RawMessage(`{"Secret":"`+agentSecret+`"}`)); err != nil {
		t.Fatal(err)
	}
	agent := regionclient.New(regionURL, "machine:"+machines[0].Uuid+":"+agentSecret)
	finish := func() {
		t.Helper()
		if _, err := agent.Do(ctx, regionclient.Request{Method: http.MethodPost, Path: api.PathPrefix + "/agent/" + machines[0].Uuid + "/jobs/" + job.Uuid + "/exit",
			Body: map[string]any{"ExitCode": 0, "ExitState": "complete"}}); err != nil {
			t.Fatalf("the agent's job exit: %v", err)
		}
	}
	return machines, job, finish
}
