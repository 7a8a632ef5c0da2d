package integration

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/agent"
	"github.com/ironflow/ironflow/dev"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/region/api"
	regionclient "github.com/ironflow/ironflow/region/client"
	"github.com/ironflow/ironflow/workflows"
)

// testMachine creates a runnable machine with an agent secret on the region of c.
func agentMachine(t *testing.T, c *regionclient.Client, m api.Machine) api.Machine {
	t.Helper()
	m.Uuid = uuid.NewString()
	m.Secret = "secret-" + m.Name
	m.Runnable, m.Available, m.Pool = true, true, "default"
	created, err := c.Machines().Create(context.Background(), m)
	if err != nil {
		t.Fatalf("create machine %s: %v", m.Name, err)
	}
	return created
}

// writeAgentConfig writes the agent config of machine m naming endpoints.
func agentConfigFile(t *testing.T, path string, m api.Machine, endpoints ...string) {
	t.Helper()
	cfg := agent.Config{Endpoints: endpoints, Machine: m.Uuid, Secret: m.Secret, PollWait: time.Second, JobTimeout: time.Minute}
	if err := agent.WriteConfig(path, cfg); err != nil {
		t.Fatal(err)
	}
}

// startAgent runs an in-process agent on the config at path until the test ends or the
// returned stop is called.
func startAgent(t *testing.T, path string) (stop func()) {
	t.Helper()
	a, err := agent.New(path, agent.Options{
		Backoff: agent.Backoff{Min: 50 * time.Millisecond, Max: 500 * time.Millisecond}, LogInterval: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logWriter{t}, nil)).With("agent", filepath.Base(filepath.Dir(path))),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("agent: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// logWriter sends a component's log to the test log (shown for failing tests).
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// closedEndpoint is the URL of a port nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	l.Close()
	return url
}

// pollUntil polls cond until it holds; after timeout it fails naming what it waited for and
// cond's last error.
func pollUntil(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	testutil.EventuallyOK(t, timeout, func() string {
		ok, err := cond()
		if ok {
			return ""
		}
		return fmt.Sprintf("%s: not within %s (last error: %v)", what, timeout, err)
	})
}

// waitJob waits until the job at key on c has ended and returns it with its log.
func waitJobEnd(t *testing.T, c *regionclient.Client, key string) (api.Job, string) {
	t.Helper()
	ctx := context.Background()
	var job api.Job
	pollUntil(t, 30*time.Second, "job "+key+" ends", func() (bool, error) {
		var err error
		job, err = c.Jobs().Get(ctx, key)
		return err == nil && (job.State == api.JobFinished || job.State == api.JobFailed), err
	})
	log, err := c.JobLog(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	return job, log
}

// createJob asks the region of c to have machine m run task.
func newJob(t *testing.T, c *regionclient.Client, m api.Machine, task string) api.Job {
	t.Helper()
	job, err := c.Jobs().Create(context.Background(), api.Job{Machine: m.Uuid, Task: task, State: api.JobCreated})
	if err != nil {
		t.Fatalf("create job %s for %s: %v", task, m.Name, err)
	}
	return job
}

func putTasks(t *testing.T, c *regionclient.Client, tasks ...api.Task) {
	t.Helper()
	for _, task := range tasks {
		if _, err := c.Tasks().Create(context.Background(), task); err != nil {
			t.Fatalf("create task %s: %v", task.Name, err)
		}
	}
}

var (
	helloTask = api.Task{Name: "hello", Script: "echo hello from the agent; echo to stderr >&2", TimeoutSeconds: 30}
	failTask  = api.Task{Name: "fail", Script: "echo about to fail; exit 3", TimeoutSeconds: 30}
)

// An agent whose first endpoint is down fails over to the region and runs the jobs created
// through the API, task jobs and ad-hoc ones, reporting their log and exit state.
func TestAgentRunsJobsFromRegion(t *testing.T) {
	s := startStack(t, dev.StackOptions{})
	ctx := context.Background()
	ra := regionClient(s, "region-a")
	putTasks(t, ra, helloTask, failTask)
	m := agentMachine(t, ra, api.Machine{Name: "linux1", OS: "ubuntu-24.04"})
	cfg := filepath.Join(t.TempDir(), "agent.yaml")
	down := closedURL(t)
	agentConfigFile(t, cfg, m, down, s.Regions["region-a"].URL)
	startAgent(t, cfg)

	tests := []struct {
		name      string
		create    func() (string, error)
		wantState string
		wantExit  string
		wantLog   []string
	}{
		{"task job", func() (string, error) { return newJob(t, ra, m, "hello").Uuid, nil },
			api.JobFinished, "complete", []string{"hello from the agent", "to stderr"}},
		{"failing task job", func() (string, error) { return newJob(t, ra, m, "fail").Uuid, nil },
			api.JobFailed, "failed", []string{"about to fail"}},
		{"ad-hoc job", func() (string, error) {
			job, err := ra.RunAdhoc(ctx, m.Uuid, api.AdhocRequest{Script: "echo adhoc $((40+2))", TimeoutSeconds: 10})
			return job.Uuid, err
		}, api.JobFinished, "complete", []string{"adhoc 42"}},
		{"ad-hoc job past its timeout", func() (string, error) {
			job, err := ra.RunAdhoc(ctx, m.Uuid, api.AdhocRequest{Script: "echo started; sleep 30", TimeoutSeconds: 1})
			return job.Uuid, err
		}, api.JobFailed, "timeout", []string{"started", "timed out"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := tt.create()
			if err != nil {
				t.Fatal(err)
			}
			job, log := waitJobEnd(t, ra, id)
			if job.State != tt.wantState || job.ExitState != tt.wantExit || job.Machine != m.Uuid || job.EndTime.IsZero() {
				t.Errorf("job %+v, want state %s exit %s", job, tt.wantState, tt.wantExit)
			}
			for _, want := range tt.wantLog {
				if !strings.Contains(log, want) {
					t.Errorf("log %q lacks %q", log, want)
				}
			}
		})
	}
	got, err := ra.Machines().Get(ctx, m.Uuid)
	if err != nil {
		t.Fatal(err)
	}
	if got.Meta[api.MetaAgentEndpoint] != s.Regions["region-a"].URL || got.Meta[api.MetaAgentLastSeen] == "" {
		t.Errorf("machine meta after failover from %s: %v", down, got.Meta)
	}
}

// migrationResult waits for the run; a run still going after two minutes is cancelled so the
// test ends with its compensations done.
func awaitMigration(t *testing.T, s *dev.Stack, run client.WorkflowRun) workflows.MigrateMachineResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var res workflows.MigrateMachineResult
	err := run.Get(ctx, &res)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		s.Client.CancelWorkflow(context.Background(), run.GetID(), run.GetRunID())
		if v, qerr := s.Client.QueryWorkflow(context.Background(), run.GetID(), run.GetRunID(), workflows.ProgressQuery); qerr == nil {
			var p workflows.Progress
			v.Get(&p)
			t.Logf("progress of %s when cancelled: %+v", run.GetID(), p)
		}
	}
	if err != nil {
		t.Fatalf("migration %s: %v", run.GetID(), err)
	}
	return res
}

// A real migration makes the agent follow the stub's redirect: it rewrites its config file
// and takes its next job from the destination.
func TestAgentFollowsRealMigration(t *testing.T) {
	s := startStack(t, dev.StackOptions{RunWorker: true})
	ctx := context.Background()
	ra, rb := regionClient(s, "region-a"), regionClient(s, "region-b")
	putTasks(t, ra, helloTask)
	putTasks(t, rb, helloTask)
	m := agentMachine(t, ra, api.Machine{Name: "linux1", OS: "ubuntu-24.04"})
	cfg := filepath.Join(t.TempDir(), "agent.yaml")
	agentConfigFile(t, cfg, m, s.Regions["region-a"].URL)
	startAgent(t, cfg)
	before, _ := waitJobEnd(t, ra, newJob(t, ra, m, "hello").Uuid)
	if before.State != api.JobFinished {
		t.Fatalf("job before the migration: %+v", before)
	}

	in := workflows.MigrateMachineInput{SourceRegion: "region-a", TargetRegion: "region-b", Machine: m.Uuid, AgentCheckInTimeout: time.Minute}
	res := awaitMigration(t, s, startMigration(ctx, t, s, in))
	if !res.AgentRepointed || res.TargetEndpoint != s.Regions["region-b"].URL {
		t.Errorf("result %+v", res)
	}
	assertActiveOnExactlyOne(ctx, t, s, m.Uuid, "region-b")
	got, err := agent.LoadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Endpoints, []string{s.Regions["region-b"].URL}) || got.Secret != m.Secret {
		t.Errorf("agent config after the migration: %+v", got)
	}
	job, log := waitJobEnd(t, rb, newJob(t, rb, m, "hello").Uuid)
	if job.State != api.JobFinished || !strings.Contains(log, "hello from") {
		t.Errorf("job on region-b: %+v, log %q", job, log)
	}
	b, err := rb.Machines().Get(ctx, m.Uuid)
	if err != nil || b.Meta[api.MetaAgentEndpoint] != s.Regions["region-b"].URL {
		t.Errorf("region-b does not see the agent: %v %v", b.Meta, err)
	}
	if data, err := os.ReadFile(cfg); err != nil || strings.Contains(string(data), s.Regions["region-a"].URL) {
		t.Errorf("config still names region-a: %s %v", data, err)
	}
}
