package store_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

// agentMachine creates a runnable machine and the seed's tasks, and returns the machine's UUID.
func agentMachine(t *testing.T, s *store.Store) string {
	t.Helper()
	mustCreate(t, s, api.KindTasks, &api.Task{Name: "stage:hello-world", Script: "echo entering stage hello-world", TimeoutSeconds: 60})
	mustCreate(t, s, api.KindTasks, &api.Task{Name: "hello-world", Script: "echo hello from $(hostname)"})
	m := api.Machine{Name: "agent-box", Runnable: true, Available: true}
	mustCreate(t, s, api.KindMachines, &m)
	return m.Uuid
}

func newJob(t *testing.T, s *store.Store, machine, task string) api.Job {
	t.Helper()
	j := api.Job{Machine: machine, Task: task, State: api.JobCreated}
	mustCreate(t, s, api.KindJobs, &j)
	return j
}

// TestNextJobHandsEachJobOutOnce: concurrent long polls of one machine get its created jobs
// oldest first, each exactly once, with the script of the job's task.
func TestNextJobHandsEachJobOutOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t)
	id := agentMachine(t, s)
	var want []string
	for _, task := range []string{"stage:hello-world", "hello-world", "stage:hello-world"} {
		want = append(want, newJob(t, s, id, task).Uuid)
	}

	got := make(chan *api.AgentJob, 8)
	var wg sync.WaitGroup
	for range cap(got) {
		wg.Go(func() {
			j, err := s.NextJob(ctx, id, time.Now())
			if err != nil {
				t.Error(err)
			}
			got <- j
		})
	}
	wg.Wait()
	close(got)
	handed := map[string]*api.AgentJob{}
	for j := range got {
		if j == nil {
			continue
		}
		if handed[j.Job.Uuid] != nil {
			t.Fatalf("job %s handed out twice", j.Job.Uuid)
		}
		handed[j.Job.Uuid] = j
	}
	if len(handed) != len(want) {
		t.Fatalf("%d jobs handed out, want %d", len(handed), len(want))
	}
	first := handed[want[0]]
	if first.Script != "echo entering stage hello-world" || first.Timeout != time.Minute || first.Job.State != api.JobRunning || first.Job.StartTime.IsZero() {
		t.Fatalf("first job: %+v", first)
	}
	if second := handed[want[1]]; second.Script != "echo hello from $(hostname)" || second.Timeout != 0 {
		t.Fatalf("second job: %+v", second)
	}
	// Exactly one job is Current, and it is the machine's CurrentJob.
	var m api.Machine
	if err := s.Get(ctx, api.KindMachines, id, &m); err != nil {
		t.Fatal(err)
	}
	var js []api.Job
	if err := s.List(ctx, api.KindJobs, store.ListOptions{Filters: map[string]string{"Machine": id, "Current": "true"}}, &js); err != nil {
		t.Fatal(err)
	}
	if len(js) != 1 || js[0].Uuid != m.CurrentJob {
		t.Fatalf("current jobs %s, machine CurrentJob %s", jsonOf(t, js), m.CurrentJob)
	}
	if j, err := s.NextJob(ctx, id, time.Now()); err != nil || j != nil {
		t.Fatalf("no job left: got %+v, %v", j, err)
	}
}

// TestNextJobRules: nothing for a machine that is not runnable; a job whose task is missing
// fails with a log line and the next job is handed out; ad-hoc jobs carry their own script.
func TestNextJobRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t)
	id := agentMachine(t, s)
	broken := newJob(t, s, id, "no-such-task")
	adhoc, err := s.RunAdhoc(ctx, alice, id, api.AdhocRequest{Script: "esxcli system version get", TimeoutSeconds: 30})
	if err != nil {
		t.Fatal(err)
	}
	if adhoc.State != api.JobCreated || adhoc.Task != api.AdhocTaskPrefix+adhoc.Uuid {
		t.Fatalf("ad-hoc job %+v", adhoc)
	}

	// A machine held by a migration is not Runnable: it gets only ad-hoc jobs, which the
	// migration uses to reach into it; its task jobs wait.
	if _, err := s.Quiesce(ctx, alice, id, migration); err != nil {
		t.Fatal(err)
	}
	j, err := s.NextJob(ctx, id, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if j == nil || j.Job.Uuid != adhoc.Uuid || j.Script != "esxcli system version get" || j.Timeout != 30*time.Second {
		t.Fatalf("ad-hoc job handed out as %+v", j)
	}
	if j, err := s.NextJob(ctx, id, time.Now()); err != nil || j != nil {
		t.Fatalf("quiesced machine got task job %+v, %v", j, err)
	}
	if _, err := s.Unquiesce(ctx, alice, id); err != nil {
		t.Fatal(err)
	}
	if j, err := s.NextJob(ctx, id, time.Now()); err != nil || j != nil {
		t.Fatalf("after the broken job failed, got %+v, %v", j, err)
	}
	var failed api.Job
	if err := s.Get(ctx, api.KindJobs, broken.Uuid, &failed); err != nil {
		t.Fatal(err)
	}
	if failed.State != api.JobFailed || failed.ExitState != "failed" {
		t.Fatalf("job of a missing task: %+v", failed)
	}
	if log, _ := s.JobLog(ctx, broken.Uuid); !strings.Contains(log, `there is no task "no-such-task"`) {
		t.Fatalf("log of the failed job: %q", log)
	}
	_, err = s.RunAdhoc(ctx, alice, id, api.AdhocRequest{Script: "  "})
	wantErr(t, err, store.ErrInvalid, "Script is empty")
	_, err = s.RunAdhoc(ctx, alice, id, api.AdhocRequest{Script: "true", TimeoutSeconds: -1})
	wantErr(t, err, store.ErrInvalid, "negative")
}

// TestFinishJob: exit ends the running job once; a repeat of the same end is accepted.
func TestFinishJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t)
	id := agentMachine(t, s)
	other := api.Machine{Name: "other", Runnable: true}
	mustCreate(t, s, api.KindMachines, &other)
	waiting := newJob(t, s, id, "hello-world")
	foreign := newJob(t, s, other.Uuid, "hello-world")
	j, err := s.NextJob(ctx, id, time.Now())
	if err != nil || j == nil {
		t.Fatalf("NextJob: %+v, %v", j, err)
	}
	queued := newJob(t, s, id, "hello-world")

	end := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	done, err := s.FinishJob(ctx, id, waiting.Uuid, api.AgentJobExit{ExitCode: 0}, end)
	if err != nil {
		t.Fatal(err)
	}
	if done.State != api.JobFinished || done.ExitState != "complete" || !done.EndTime.Equal(end) || !done.Current {
		t.Fatalf("finished job %+v", done)
	}
	if again, err := s.FinishJob(ctx, id, waiting.Uuid, api.AgentJobExit{ExitState: "complete"}, end.Add(time.Hour)); err != nil || !again.EndTime.Equal(end) {
		t.Fatalf("repeated exit: %+v, %v", again, err)
	}
	cases := []struct {
		name  string
		job   string
		exit  api.AgentJobExit
		class error
		want  string
	}{
		{"another end", waiting.Uuid, api.AgentJobExit{ExitState: "failed", ExitCode: 1}, store.ErrConflict, `already ended with ExitState "complete"`},
		{"never started", queued.Uuid, api.AgentJobExit{}, store.ErrConflict, "was never started"},
		{"another machine's job", foreign.Uuid, api.AgentJobExit{}, store.ErrNotFound, "has no job"},
		{"unknown exit state", waiting.Uuid, api.AgentJobExit{ExitState: "meh"}, store.ErrInvalid, `ExitState "meh"`},
		{"contradiction", waiting.Uuid, api.AgentJobExit{ExitState: "complete", ExitCode: 2}, store.ErrInvalid, "contradicts ExitCode 2"},
	}
	for _, c := range cases {
		_, err := s.FinishJob(ctx, id, c.job, c.exit, end)
		wantErr(t, err, c.class, c.want)
	}
	j, err = s.NextJob(ctx, id, time.Now())
	if err != nil || j == nil || j.Job.Uuid != queued.Uuid {
		t.Fatalf("next job: %+v, %v", j, err)
	}
	failed, err := s.FinishJob(ctx, id, queued.Uuid, api.AgentJobExit{ExitState: "timeout", ExitCode: 124}, end)
	if err != nil || failed.State != api.JobFailed || failed.ExitState != "timeout" {
		t.Fatalf("timed out job: %+v, %v", failed, err)
	}
}

// TestAgentCallsOfAStub: a migrated stub answers every agent call with where it went.
func TestAgentCallsOfAStub(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t)
	id := agentMachine(t, s)
	job := newJob(t, s, id, "hello-world")
	m, err := s.AgentCheckin(ctx, id, api.AgentCheckin{Version: "1.0", Endpoint: "http://10.0.0.1:5248"}, time.Date(2026, 11, 30, 7, 0, 0, 5, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if m.Meta[api.MetaAgentLastSeen] != "2026-11-30T07:00:00.000000005Z" || m.Meta[api.MetaAgentVersion] != "1.0" || m.Meta[api.MetaAgentEndpoint] != "http://10.0.0.1:5248" {
		t.Fatalf("check-in Meta %v", m.Meta)
	}
	_, err = s.AgentCheckin(ctx, id, api.AgentCheckin{Endpoint: "10.0.0.1"}, time.Now())
	wantErr(t, err, store.ErrInvalid, "not an http(s) URL")

	if _, err := s.Quiesce(ctx, alice, id, migration); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FinalizeMigration(ctx, alice, id, drp2); err != nil {
		t.Fatal(err)
	}
	calls := map[string]func() error{
		"checkin": func() error { _, err := s.AgentCheckin(ctx, id, api.AgentCheckin{}, time.Now()); return err },
		"next":    func() error { _, err := s.NextJob(ctx, id, time.Now()); return err },
		"exit":    func() error { _, err := s.FinishJob(ctx, id, job.Uuid, api.AgentJobExit{}, time.Now()); return err },
	}
	for name, call := range calls {
		var moved *store.MovedError
		if err := call(); !errors.As(err, &moved) || moved.Endpoint != drp2 || moved.Machine != id {
			t.Errorf("%s on a stub: %v", name, err)
		}
	}
	_, err = s.RunAdhoc(ctx, alice, id, api.AdhocRequest{Script: "true"})
	wantErr(t, err, store.ErrConflict, "run the script there")
}

// TestSecrets: secrets are kept apart from the machine, its exports and the audit log, and go
// with the machine.
func TestSecrets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t)
	fixtures(t, s)
	const name, value = "migrate-machine/esxi-ssh-priv-key", "-----BEGIN OPENSSH PRIVATE KEY----- s3cr3t"
	if err := s.SetSecret(ctx, alice, "Name:m1", api.Secret{Name: name, Value: "old"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSecret(ctx, alice, mach1, api.Secret{Name: name, Value: value}); err != nil {
		t.Fatal(err)
	}
	if sec, err := s.Secret(ctx, "Name:m1", name); err != nil || sec != (api.Secret{Name: name, Value: value}) {
		t.Fatalf("Secret = %+v, %v", sec, err)
	}
	_, err := s.Secret(ctx, "Name:m1", "other")
	wantErr(t, err, store.ErrNotFound, `has no secret "other"`)
	wantErr(t, s.SetSecret(ctx, alice, "Name:m1", api.Secret{Name: " x"}), store.ErrInvalid, "leading or trailing spaces")
	wantErr(t, s.SetSecret(ctx, alice, "Name:m1", api.Secret{Name: "x", Value: "a\x00b"}), store.ErrInvalid, "NUL")
	wantErr(t, s.SetSecret(ctx, alice, "Name:nope", api.Secret{Name: "x"}), store.ErrNotFound, "not found")

	b, err := s.Export(ctx, mach1)
	if err != nil {
		t.Fatal(err)
	}
	events, err := s.Events(ctx, store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for what, doc := range map[string]string{"export": jsonOf(t, b), "events": jsonOf(t, events)} {
		if strings.Contains(doc, "s3cr3t") || strings.Contains(doc, `"old"`) {
			t.Fatalf("the secret value shows in the %s: %s", what, doc)
		}
	}
	if !strings.Contains(jsonOf(t, events), name) {
		t.Fatal("the audit log does not name the secret")
	}

	if err := s.DeleteSecret(ctx, alice, "Name:m1", name); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSecret(ctx, alice, "Name:m1", name); err != nil {
		t.Fatalf("deleting an absent secret: %v", err)
	}
	if err := s.SetSecret(ctx, alice, mach1, api.Secret{Name: name, Value: value}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, alice, api.KindMachines, mach1, false); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, "machine_secrets"); n != 0 {
		t.Fatalf("%d secrets left after the machine was deleted", n)
	}
}

// TestTasks: task names may hold ":" (DRP's stage tasks) and are then addressed as Name:...
func TestTasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t)
	mustCreate(t, s, api.KindTasks, &api.Task{Name: "stage:hello-world", Script: "echo hi"})
	var task api.Task
	if err := s.Get(ctx, api.KindTasks, "Name:stage:hello-world", &task); err != nil || task.Meta == nil {
		t.Fatalf("get task: %+v, %v", task, err)
	}
	wantErr(t, s.Create(ctx, alice, api.KindTasks, &api.Task{Name: "stage:hello-world", Script: "x"}), store.ErrConflict, `task Name "stage:hello-world" already exists`)
	wantErr(t, s.Create(ctx, alice, api.KindTasks, &api.Task{Name: "t", Script: ""}), store.ErrInvalid, "Script is empty")
	wantErr(t, s.Create(ctx, alice, api.KindTasks, &api.Task{Name: "t", Script: "x", TimeoutSeconds: -1}), store.ErrInvalid, "negative")
}

// BenchmarkNextJobIdle is one round of a long poll that finds nothing: the common case.
func BenchmarkNextJobIdle(b *testing.B) {
	ctx := context.Background()
	s := benchStore(b)
	m := api.Machine{Name: "idle", Runnable: true}
	if err := s.Create(ctx, alice, api.KindMachines, &m); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if j, err := s.NextJob(ctx, m.Uuid, time.Now()); err != nil || j != nil {
			b.Fatalf("NextJob = %v, %v", j, err)
		}
	}
}

// BenchmarkNextJobTake hands out one job per round.
func BenchmarkNextJobTake(b *testing.B) {
	ctx := context.Background()
	s := benchStore(b)
	if err := s.Create(ctx, alice, api.KindTasks, &api.Task{Name: "t", Script: "true"}); err != nil {
		b.Fatal(err)
	}
	m := api.Machine{Name: "busy", Runnable: true}
	if err := s.Create(ctx, alice, api.KindMachines, &m); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		b.StopTimer()
		if err := s.Create(ctx, alice, api.KindJobs, &api.Job{Machine: m.Uuid, Task: "t"}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if j, err := s.NextJob(ctx, m.Uuid, time.Now()); err != nil || j == nil {
			b.Fatalf("NextJob = %v, %v", j, err)
		}
	}
}
