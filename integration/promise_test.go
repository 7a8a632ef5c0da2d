package integration

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/agent"
	"github.com/ironflow/ironflow/dev"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/workers"
	"github.com/ironflow/ironflow/workflows"
)

// The last copy survives: the source machine is deleted (in its region's database, behind any API
// guard) while the migration waits for the paused agent. The undo must not delete the copy
// on the target, now the only one: the machine ends active there, with every job and log.
func TestSourceDeletedMidMigrationKeepsTheCopy(t *testing.T) {
	s := startStack(t, dev.StackOptions{RunWorker: true})
	ctx := context.Background()
	ra, rb := regionClient(s, "region-a"), regionClient(s, "region-b")
	putTasks(t, ra, helloTask)
	m := agentMachine(t, ra, api.Machine{Name: "linux-deleted", OS: "ubuntu-24.04"})
	cfg := filepath.Join(t.TempDir(), "agent.yaml")
	agentConfigFile(t, cfg, m, s.Regions["region-a"].URL)
	stopAgent := startAgent(t, cfg)
	var jobs []string
	for range 3 {
		job, _ := waitJobEnd(t, ra, newJob(t, ra, m, "hello").Uuid)
		jobs = append(jobs, job.Uuid)
	}
	stopAgent() // paused: it will not follow the redirect

	in := workflows.MigrateMachineInput{SourceRegion: "region-a", TargetRegion: "region-b", Machine: m.Uuid, AgentCheckInTimeout: 20 * time.Second}
	run := startMigration(ctx, t, s, in)
	pollUntil(t, time.Minute, "migration reaches "+workflows.PhaseRepointing, func() (bool, error) {
		v, err := s.Client.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), workflows.ProgressQuery)
		var p workflows.Progress
		if err == nil {
			err = v.Get(&p)
		}
		return p.Phase == workflows.PhaseRepointing, err
	})
	deleteInDatabase(ctx, t, s, "region-a", m.Uuid)

	err := run.Get(ctx, nil)
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != workflows.ErrTypeCompensationFailed || !strings.Contains(err.Error(), "is active on region-b") {
		t.Fatalf("migration error %v, want %s saying the machine is active on region-b", err, workflows.ErrTypeCompensationFailed)
	}
	got := getMachine(ctx, t, rb, m.Uuid)
	if !got.Runnable || got.Locked || got.Meta[api.MetaRedirectEndpoint] != "" {
		t.Errorf("machine on region-b is not live: %+v", got)
	}
	for _, id := range jobs {
		if log, err := rb.JobLog(ctx, id); err != nil || !strings.Contains(log, "hello from") {
			t.Errorf("job %s on region-b: log %q, %v", id, log, err)
		}
	}
}

// The agent follows an undo: the source redirected the agent and the agent moved to the target, then
// the migration failed (activation refused) and was undone. The agent must come back to the
// source, where the machine is active again, and run its jobs there.
func TestRollbackAfterTheAgentMovedBringsItBack(t *testing.T) {
	s := startStack(t, dev.StackOptions{})
	ctx := context.Background()
	startRefusingActivationWorker(t, s)
	ra := regionClient(s, "region-a")
	putTasks(t, ra, helloTask)
	m := agentMachine(t, ra, api.Machine{Name: "linux-rollback", OS: "ubuntu-24.04"})
	cfg := filepath.Join(t.TempDir(), "agent.yaml")
	agentConfigFile(t, cfg, m, s.Regions["region-a"].URL)
	startAgent(t, cfg)
	waitJobEnd(t, ra, newJob(t, ra, m, "hello").Uuid)

	in := workflows.MigrateMachineInput{SourceRegion: "region-a", TargetRegion: "region-b", Machine: m.Uuid, AgentCheckInTimeout: time.Minute}
	err := startMigration(ctx, t, s, in).Get(ctx, nil)
	if err == nil || !strings.Contains(err.Error(), "activation refused by the test") {
		t.Fatalf("migration error %v, want the refused activation", err)
	}
	assertActiveOnExactlyOne(ctx, t, s, m.Uuid, "region-a")
	pollUntil(t, 30*time.Second, "agent config names region-a again", func() (bool, error) {
		c, err := agent.LoadConfig(cfg)
		return err == nil && slices.Equal(c.Endpoints, []string{s.Regions["region-a"].URL}), err
	})
	job, log := waitJobEnd(t, ra, newJob(t, ra, m, "hello").Uuid)
	if job.State != api.JobFinished || !strings.Contains(log, "hello from") {
		t.Errorf("job on region-a after the rollback: %+v, log %q", job, log)
	}
}

// startRefusingActivationWorker runs the migration worker of the stack with Activate
// replaced by one the target refuses for good.
func startRefusingActivationWorker(t *testing.T, s *dev.Stack) {
	t.Helper()
	regions, err := activities.NewRegions(s.RegionsConfig(), activities.DialClient)
	if err != nil {
		t.Fatal(err)
	}
	w := workers.NewMigrationWorker(s.Client, &activities.Activities{Regions: regions})
	w.RegisterActivityWithOptions(func(context.Context, activities.MachineRef) error {
		return temporal.NewNonRetryableApplicationError("activation refused by the test", activities.ErrTypeRegionRefused, nil)
	}, activity.RegisterOptions{Name: "Activate", DisableAlreadyRegisteredCheck: true})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
}

// deleteInDatabase deletes a machine (its jobs and logs cascade) straight from a region's
// database, as an operator with SQL access, or a bug, would.
func deleteInDatabase(ctx context.Context, t *testing.T, s *dev.Stack, region, machine string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, s.Postgres.URL("ironflow_"+strings.ReplaceAll(region, "-", "_")))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tag, err := conn.Exec(ctx, "DELETE FROM machines WHERE uuid = $1::uuid", machine)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("delete machine %s on %s: %v (%d rows)", machine, region, err, tag.RowsAffected())
	}
}
