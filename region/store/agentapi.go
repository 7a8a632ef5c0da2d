package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/region/api"
)

// The machine agent API of the store (region/api/agent.go). The server authenticates the agent
// against Machine.Secret; these calls act on the machine the agent is, by UUID.

// MovedError answers an agent call for a migrated stub: the agent must go to Endpoint.
type MovedError struct {
	Machine  string
	Endpoint string
}

func (e *MovedError) Error() string {
	return fmt.Sprintf("machine %s migrated to %s", e.Machine, e.Endpoint)
}

// Meta keys of ad-hoc jobs: their script travels with the job (also when it migrates).
const (
	MetaAdhocScript  = "adhoc-script"
	MetaAdhocTimeout = "adhoc-timeout-seconds"
)

// AgentPrincipal is who agent calls are recorded as: the machine itself.
func AgentPrincipal(machine string) Principal {
	return Principal{User: machine, Role: api.RoleMachine}
}

// agentOp runs fn on the locked machine (by UUID) unless it is a stub (*MovedError).
func (s *Store) agentOp(ctx context.Context, machine string, fn func(tx pgx.Tx, r row[api.Machine]) error) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		r, err := machines.resolve(ctx, tx, "Uuid:"+machine, true)
		if err != nil {
			return err
		}
		if isStub(r.obj) {
			return &MovedError{Machine: r.obj.Uuid, Endpoint: r.obj.Meta[api.MetaRedirectEndpoint]}
		}
		return fn(tx, r)
	})
}

// AgentCheckin records that the machine's agent checked in at now: Meta.agent-last-seen
// (RFC 3339 with nanoseconds, so every check-in changes it), agent-endpoint and agent-version.
// Inactive machines (an imported copy waiting for its agent) accept check-ins too.
func (s *Store) AgentCheckin(ctx context.Context, machine string, in api.AgentCheckin, now time.Time) (api.Machine, error) {
	if in.Endpoint != "" {
		if err := validURL("agent check-in", "Endpoint", in.Endpoint); err != nil {
			return api.Machine{}, err
		}
	}
	var out *api.Machine
	err := s.agentOp(ctx, machine, func(tx pgx.Tx, r row[api.Machine]) error {
		m, err := clone(r.obj)
		if err != nil {
			return err
		}
		emptyMeta(&m.Meta)
		m.Meta[api.MetaAgentLastSeen] = now.UTC().Format(time.RFC3339Nano)
		for key, value := range map[string]string{api.MetaAgentEndpoint: in.Endpoint, api.MetaAgentVersion: in.Version} {
			if value != "" {
				m.Meta[key] = value
			}
		}
		out, err = updateMachine(ctx, tx, AgentPrincipal(m.Uuid), r, m)
		return err
	})
	if err != nil {
		return api.Machine{}, err
	}
	return *out, nil
}

// NextJob hands the oldest "created" job of a Runnable machine to its agent (a machine that is
// not Runnable, e.g. held by a migration, gets only ad-hoc jobs, which migrations use to reach
// into it): the job becomes
// "running" and Current (the machine's other jobs stop being Current), the machine's
// CurrentJob names it. nil means no job is waiting. Concurrent calls for one machine are
// serialised on the machine's row, so each job is handed out once. A job whose task does not
// exist is failed with a log line saying so, and the next one is tried.
func (s *Store) NextJob(ctx context.Context, machine string, now time.Time) (*api.AgentJob, error) {
	if waiting, err := s.jobWaiting(ctx, machine); err != nil || !waiting {
		return nil, err
	}
	var out *api.AgentJob
	err := s.agentOp(ctx, machine, func(tx pgx.Tx, r row[api.Machine]) error {
		by := AgentPrincipal(r.obj.Uuid)
		for {
			jr, err := oldestCreatedJob(ctx, tx, r.obj.Uuid, !r.obj.Runnable)
			if err != nil || jr == nil {
				return err
			}
			script, timeout, err := jobScript(ctx, tx, jr.obj)
			var missing *missingTaskError
			if errors.As(err, &missing) {
				if err := failUnrunnable(ctx, tx, by, *jr, missing.Error(), now); err != nil {
					return err
				}
				continue
			}
			if err != nil {
				return err
			}
			job, err := startJob(ctx, tx, by, r, *jr, now)
			if err != nil {
				return err
			}
			out = &api.AgentJob{Job: *job, Script: script, Timeout: timeout}
			return nil
		}
	})
	return out, err
}

// jobWaiting looks, without locking anything, whether the machine may have a job to hand out:
// most long-poll rounds find none and must stay cheap. A stub is *MovedError.
func (s *Store) jobWaiting(ctx context.Context, machine string) (bool, error) {
	if _, err := normUUID(machine); err != nil {
		return false, err
	}
	var redirect string
	var waiting bool
	err := s.pool.QueryRow(ctx, `SELECT coalesce(m.doc->'Meta'->>$2, ''),
			EXISTS (SELECT 1 FROM jobs j WHERE j.machine = m.uuid AND j.doc->>'State' = 'created'
				AND (coalesce((m.doc->>'Runnable')::boolean, false) OR starts_with(j.doc->>'Task', $3)))
		FROM machines m WHERE m.uuid = $1::uuid`, machine, api.MetaRedirectEndpoint, api.AdhocTaskPrefix).Scan(&redirect, &waiting)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, notFoundf("machine %s not found", machine)
	case err != nil:
		return false, classify(err)
	case redirect != "":
		return false, &MovedError{Machine: machine, Endpoint: redirect}
	}
	return waiting, nil
}

// oldestCreatedJob locks the machine's oldest created job (only ad-hoc ones when adhocOnly),
// skipping jobs other transactions hold; nil when there is none.
func oldestCreatedJob(ctx context.Context, tx pgx.Tx, machine string, adhocOnly bool) (*row[api.Job], error) {
	var r row[api.Job]
	var doc []byte
	err := tx.QueryRow(ctx, `SELECT seq, doc FROM jobs WHERE machine = $1::uuid AND doc->>'State' = 'created'
		AND (NOT $2 OR starts_with(doc->>'Task', $3))
		ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED`, machine, adhocOnly, api.AdhocTaskPrefix).Scan(&r.seq, &doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if r.obj, err = decode[api.Job](doc); err != nil {
		return nil, fmt.Errorf("stored job: %w", err)
	}
	return &r, nil
}

type missingTaskError struct{ job, task string }

func (e *missingTaskError) Error() string {
	return fmt.Sprintf("job %s cannot run: there is no task %q", e.job, e.task)
}

// jobScript returns what the job runs: the inline script of an ad-hoc job, else the script of
// the task named by Job.Task.
func jobScript(ctx context.Context, tx pgx.Tx, j *api.Job) (string, time.Duration, error) {
	if strings.HasPrefix(j.Task, api.AdhocTaskPrefix) {
		secs, _ := strconv.Atoi(j.Meta[MetaAdhocTimeout]) // written by RunAdhoc; absent means the agent's default
		return j.Meta[MetaAdhocScript], time.Duration(secs) * time.Second, nil
	}
	t, err := tasks.resolve(ctx, tx, taskKey(j.Task), false)
	if errors.Is(err, ErrNotFound) {
		return "", 0, &missingTaskError{job: j.Uuid, task: j.Task}
	}
	if err != nil {
		return "", 0, err
	}
	return t.obj.Script, time.Duration(t.obj.TimeoutSeconds) * time.Second, nil
}

// failUnrunnable ends a job that cannot be handed out, saying why in its log.
func failUnrunnable(ctx context.Context, tx pgx.Tx, by Principal, jr row[api.Job], why string, now time.Time) error {
	j, err := clone(jr.obj)
	if err != nil {
		return err
	}
	j.State, j.ExitState, j.EndTime = api.JobFailed, "failed", now
	if _, err := updateJob(ctx, tx, by, jr, j); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO job_logs (job, text) VALUES ($1, $2)
		ON CONFLICT (job) DO UPDATE SET text = job_logs.text || excluded.text`, j.Uuid, "ironflow: "+why+"\n")
	return err
}

// startJob marks jr running and current on the machine r.
func startJob(ctx context.Context, tx pgx.Tx, by Principal, r row[api.Machine], jr row[api.Job], now time.Time) (*api.Job, error) {
	w := &where{}
	w.add("machine = $1::uuid AND doc->>'Current' = 'true' AND uuid <> $2::uuid", r.obj.Uuid, jr.obj.Uuid)
	previous, err := jobs.selectRows(ctx, tx, w, " FOR UPDATE")
	if err != nil {
		return nil, err
	}
	for _, pr := range previous {
		p, err := clone(pr.obj)
		if err != nil {
			return nil, err
		}
		p.Current = false
		if _, err := updateJob(ctx, tx, by, pr, p); err != nil {
			return nil, err
		}
	}
	j, err := clone(jr.obj)
	if err != nil {
		return nil, err
	}
	j.State, j.StartTime, j.Current = api.JobRunning, now, true
	started, err := updateJob(ctx, tx, by, jr, j)
	if err != nil {
		return nil, err
	}
	m, err := clone(r.obj)
	if err != nil {
		return nil, err
	}
	m.CurrentJob = j.Uuid
	_, err = updateMachine(ctx, tx, by, r, m)
	return started, err
}

// Exit states an agent reports, and the job State each one ends in.
var exitStates = map[string]string{"complete": api.JobFinished, "failed": api.JobFailed, "timeout": api.JobFailed}

// FinishJob records how the machine's running job ended: State finished (ExitState complete)
// or failed, ExitState, EndTime now. The job stays Current while it is the machine's
// CurrentJob. Reporting the same end again changes nothing.
func (s *Store) FinishJob(ctx context.Context, machine, jobKey string, exit api.AgentJobExit, now time.Time) (api.Job, error) {
	exitState := exit.ExitState
	if exitState == "" {
		exitState = "complete"
		if exit.ExitCode != 0 {
			exitState = "failed"
		}
	}
	state, ok := exitStates[exitState]
	switch {
	case !ok:
		return api.Job{}, invalidf("ExitState %q is not complete, failed or timeout", exit.ExitState)
	case exitState == "complete" && exit.ExitCode != 0:
		return api.Job{}, invalidf("ExitState complete contradicts ExitCode %d", exit.ExitCode)
	}
	var out *api.Job
	err := s.agentOp(ctx, machine, func(tx pgx.Tx, r row[api.Machine]) error {
		jr, err := jobs.resolve(ctx, tx, jobKey, true)
		if err != nil {
			return err
		}
		if jr.obj.Machine != r.obj.Uuid {
			return notFoundf("machine %s has no job %s", r.obj.Uuid, jobKey)
		}
		switch jr.obj.State {
		case api.JobCreated:
			return conflictf("job %s was never started", jr.obj.Uuid)
		case api.JobFinished, api.JobFailed:
			if jr.obj.ExitState != exitState {
				return conflictf("job %s already ended with ExitState %q", jr.obj.Uuid, jr.obj.ExitState)
			}
			out = jr.obj
			return nil
		}
		j, err := clone(jr.obj)
		if err != nil {
			return err
		}
		j.State, j.ExitState, j.EndTime = state, exitState, now
		by := AgentPrincipal(r.obj.Uuid)
		if r.obj.CurrentJob == "" || r.obj.CurrentJob == j.Uuid {
			j.Current = true
			if r.obj.CurrentJob == "" {
				m, err := clone(r.obj)
				if err != nil {
					return err
				}
				m.CurrentJob = j.Uuid
				if _, err := updateMachine(ctx, tx, by, r, m); err != nil {
					return err
				}
			}
		}
		out, err = updateJob(ctx, tx, by, jr, j)
		return err
	})
	if err != nil {
		return api.Job{}, err
	}
	return *out, nil
}
