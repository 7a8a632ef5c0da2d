package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ironflow/ironflow/region/api"
)

// HostRegion is what the ESXi activities need from the region holding the machine's record:
// its secrets (the temporary SSH key) and ad-hoc jobs for the machine's agent. ClientRegion
// has it through the region client.
type HostRegion interface {
	GetMachine(ctx context.Context, key string) (api.Machine, error)
	GetSecret(ctx context.Context, key, name string) (api.Secret, error)
	PutSecret(ctx context.Context, key string, secret api.Secret) error
	DeleteSecret(ctx context.Context, key, name string) error
	RunAdhoc(ctx context.Context, key string, req api.AdhocRequest) (api.Job, error)
	GetJob(ctx context.Context, key string) (api.Job, error)
	JobLog(ctx context.Context, key string) (string, error)
	DeleteJob(ctx context.Context, key string) error
	SetMachineParam(ctx context.Context, key, name string, value any) error
}

// SetMachineParam sets one param of the machine at key with a merge patch, leaving the others.
func (c ClientRegion) SetMachineParam(ctx context.Context, key, name string, value any) error {
	patch, err := json.Marshal(map[string]any{"Params": map[string]any{name: value}})
	if err != nil {
		return fmt.Errorf("param %s: %w", name, err)
	}
	_, err = c.Machines().Patch(ctx, key, patch)
	return err
}

// DeleteJob deletes the job at key.
func (c ClientRegion) DeleteJob(ctx context.Context, key string) error {
	return c.Jobs().Delete(ctx, key, false)
}

// errAgentAway means the machine's agent did not take an ad-hoc job in time.
var errAgentAway = errors.New("the machine's agent did not take the job")

// regionSecrets keeps the ESXi path's secret params in the region's machine secrets, so the
// temporary private key never enters workflow history.
type regionSecrets struct {
	region HostRegion
}

func (s regionSecrets) GetSecretParam(ctx context.Context, machine, name string) (string, bool, error) {
	secret, err := s.region.GetSecret(ctx, machine, name)
	switch {
	case isNotFound(err):
		return "", false, nil
	case err != nil:
		return "", false, err
	}
	return secret.Value, true, nil
}

func (s regionSecrets) SetSecretParam(ctx context.Context, machine, name, value string) error {
	return s.region.PutSecret(ctx, machine, api.Secret{Name: name, Value: value})
}

// DeleteSecretParam succeeds when the secret, or the whole machine, is already gone: secrets
// are deleted with their machine.
func (s regionSecrets) DeleteSecretParam(ctx context.Context, machine, name string) error {
	if err := s.region.DeleteSecret(ctx, machine, name); err != nil && !isNotFound(err) {
		return err
	}
	return nil
}

// adhocRunner runs host-side scripts as ad-hoc jobs of the machine's agent: it asks the
// region for the job, polls it until it ends and returns its log (the agent writes stdout
// and stderr there together; the ESXi scripts' answers tolerate that).
type adhocRunner struct {
	region  HostRegion
	machine string
	poll    time.Duration
	timeout time.Duration // handed to the agent as the job's timeout
	// take bounds the wait for the agent to take the job: an agent that polls takes it
	// within its long-poll wait, so a job still "created" after that has no agent to run it.
	take time.Duration
}

// logTail is how much of a failed job's log goes into the error.
const logTail = 2 << 10

func (r adhocRunner) Run(ctx context.Context, script string) ([]byte, error) {
	job, err := r.region.RunAdhoc(ctx, r.machine, api.AdhocRequest{Script: script, TimeoutSeconds: int(r.timeout / time.Second)})
	if err != nil {
		return nil, fmt.Errorf("ask the agent of machine %s to run a script: %w", r.machine, err)
	}
	job, err = r.wait(ctx, job.Uuid)
	if err != nil {
		return nil, err
	}
	log, err := r.region.JobLog(ctx, job.Uuid)
	if err != nil {
		return nil, fmt.Errorf("log of ad-hoc job %s: %w", job.Uuid, err)
	}
	if job.State != api.JobFinished {
		tail := log[max(0, len(log)-logTail):]
		return nil, fmt.Errorf("ad-hoc job %s on machine %s %s (exit state %q): %s", job.Uuid, r.machine, job.State, job.ExitState, strings.TrimSpace(tail))
	}
	return []byte(log), nil
}

// wait polls the job until it is finished or failed. A job the agent does not take within
// r.take is deleted, so that it does not run long after the migration gave up on it.
func (r adhocRunner) wait(ctx context.Context, id string) (api.Job, error) {
	ticker := time.NewTicker(r.poll)
	defer ticker.Stop()
	deadline := time.Now().Add(r.take)
	for {
		job, err := r.region.GetJob(ctx, id)
		switch {
		case err == nil && (job.State == api.JobFinished || job.State == api.JobFailed):
			return job, nil
		case err == nil && job.State == api.JobCreated && time.Now().After(deadline):
			if err := r.region.DeleteJob(ctx, id); err != nil && !isNotFound(err) {
				return job, fmt.Errorf("%w within %s; deleting ad-hoc job %s: %v", errAgentAway, r.take, id, err)
			}
			return job, fmt.Errorf("%w within %s (ad-hoc job %s of machine %s, deleted)", errAgentAway, r.take, id, r.machine)
		case err != nil && isFinal(err):
			return job, fmt.Errorf("ad-hoc job %s: %w", id, err)
		}
		select {
		case <-ctx.Done():
			return job, fmt.Errorf("ad-hoc job %s on machine %s: %w", id, r.machine, ctx.Err())
		case <-ticker.C:
		}
	}
}
