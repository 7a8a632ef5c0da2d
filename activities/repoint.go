package activities

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"golang.org/x/crypto/ssh"

	"github.com/ironflow/ironflow/activities/esxi"
	"github.com/ironflow/ironflow/activities/heartbeat"
	"github.com/ironflow/ironflow/region/api"
)

// RepointESXi repoints a host without an agent that follows redirects (ESXi): a temporary
// SSH key, the agent config rewritten over SSH, then sshd and root's keys restored as found.
const RepointESXi RepointMethod = "esxi"

// ParamSSHHostKey is the machine param holding the host's SSH public key (authorized_keys
// format); without it the worker's TOFU policy decides.
const ParamSSHHostKey = "esxi/ssh-host-key"

// Application error types of the ESXi activities.
const (
	ErrHostKeyRefused = "HostKeyRefused" // the host key is unknown (no TOFU) or does not match
	ErrHostUnusable   = "HostUnusable"   // the machine or the worker lacks what SSH needs
	ErrAgentAway      = "AgentAway"      // the machine's agent did not take an ad-hoc job
)

// repointMethod says how a machine's agent moves: ESXi hosts over SSH, other machines whose
// agent ever checked in by following the redirect, the rest not at all.
func repointMethod(m api.Machine) RepointMethod {
	switch {
	case strings.HasPrefix(strings.ToLower(m.OS), "esxi"):
		return RepointESXi
	case m.Meta[api.MetaAgentLastSeen] != "":
		return RepointAgent
	default:
		return RepointNone
	}
}

// ESXiConfig is the worker's configuration for SSH to ESXi hosts. The operator key lives
// here, never in workflow inputs or results.
type ESXiConfig struct {
	// Login is an operator key authorized for User on hosts where no agent runs (sshd must
	// already run there); nil means only hosts with an agent can be repointed.
	Login ssh.Signer
	// AllowTOFU accepts the host key seen first when the machine records none
	// (ParamSSHHostKey); the later steps of the same migration then pin it.
	AllowTOFU bool
	User      string        // default root
	Port      int           // SSH port of the hosts; default 22
	Paths     esxi.Paths    // empty fields: ESXi defaults
	Commands  esxi.Commands // empty fields: ESXi defaults
	// AdhocPoll is how often an ad-hoc job of the agent is polled (default 2s), AdhocTimeout
	// the job's own timeout on the host (default 5m), AdhocTake the wait for the agent to take
	// it (default 2m: more than the agent's longest long poll).
	AdhocPoll    time.Duration
	AdhocTimeout time.Duration
	AdhocTake    time.Duration
}

// ESXiInput names the host of one ESXi repoint. It carries no secret: the temporary private
// key stays in the region's machine secrets, the operator key in worker configuration.
type ESXiInput struct {
	// MachineRef names the region holding the machine's live record (the target, during a
	// migration): its Address, its host key param and its secrets.
	MachineRef
	// UseAgent runs the host-side steps as ad-hoc jobs of the machine's agent, which polls that
	// region; otherwise the worker's Login key opens SSH.
	UseAgent bool
	// HostKey pins the host key Prepare verified or accepted; "" = the machine's param.
	HostKey string
}

// ESXiRewriteInput is ESXiInput plus the endpoint the agent config must name.
type ESXiRewriteInput struct {
	ESXiInput
	Endpoint string
}

// ESXiPrepare backs up the host's SSH service state and root's keys, starts SSH if needed and
// installs a temporary key that logs in (esxi.Repointer.Prepare).
func (a *Activities) ESXiPrepare(ctx context.Context, in ESXiInput) (esxi.Prepared, error) {
	var p esxi.Prepared
	var trustedFirstUse bool
	err := a.withRepointer(ctx, in, func(r *esxi.Repointer) error {
		var err error
		p, err = r.Prepare(ctx)
		trustedFirstUse = r.Host.AllowTOFU // only set when no host key was recorded
		return err
	})
	if err != nil || !trustedFirstUse || p.HostKey == "" {
		return p, err
	}
	return p, a.recordHostKey(ctx, in.MachineRef, p.HostKey)
}

// recordHostKey keeps a host key accepted on first use in the machine's ParamSSHHostKey, so
// every later connection to the host is verified against it.
func (a *Activities) recordHostKey(ctx context.Context, ref MachineRef, key string) error {
	region, err := a.Regions.Region(ref.Region)
	if err != nil {
		return err
	}
	hr, ok := region.(HostRegion)
	if !ok {
		return nonRetryable(ErrHostUnusable, "region %s: its client (%T) cannot record machine params", ref.Region, region)
	}
	if err := hr.SetMachineParam(ctx, ref.Machine, ParamSSHHostKey, key); err != nil {
		return classify(err, "record the SSH host key of machine %s on %s", ref.Machine, ref.Region)
	}
	return nil
}

// ESXiRewriteAgentConfig points the host's agent config at in.Endpoint over SSH with the
// temporary key.
func (a *Activities) ESXiRewriteAgentConfig(ctx context.Context, in ESXiRewriteInput) error {
	return a.withRepointer(ctx, in.ESXiInput, func(r *esxi.Repointer) error {
		return r.RewriteAgentConfig(ctx, in.Endpoint)
	})
}

// ESXiCleanup restores root's keys byte for byte and the SSH service as found, and deletes the
// temporary key; it is also the compensation of the other two, so it is safe to run again.
// When the agent that should run it is gone, the temporary key itself logs in to do it: no
// temporary key may outlive the migration. Without a stored key there is nothing to undo.
func (a *Activities) ESXiCleanup(ctx context.Context, in ESXiInput) error {
	// Checked before connecting: a host Prepare never changed may be one this worker cannot
	// reach at all (wrong host key, no login), and its undo must not fail for ever.
	if region, err := a.Regions.Region(in.Region); err == nil {
		if hr, ok := region.(HostRegion); ok {
			if _, found, err := (regionSecrets{region: hr}).GetSecretParam(ctx, in.Machine, esxi.SecretParamPrivateKey); err == nil && !found {
				return nil
			}
		}
	}
	return a.withRepointer(ctx, in, func(r *esxi.Repointer) error {
		err := r.Cleanup(ctx)
		if !errors.Is(err, errAgentAway) {
			return err
		}
		value, found, serr := r.Secrets.GetSecretParam(ctx, r.Machine, esxi.SecretParamPrivateKey)
		switch {
		case serr != nil:
			return errors.Join(err, serr)
		case !found:
			// Prepare stores the key before its first change to the host, and Cleanup deletes
			// it last: without one there is nothing on the host to undo.
			return nil
		}
		key, kerr := ssh.ParsePrivateKey([]byte(value))
		if kerr != nil {
			return errors.Join(err, kerr)
		}
		activity.GetLogger(ctx).Warn("agent away: cleaning up the host over SSH with the temporary key", "machine", r.Machine)
		bySSH := *r
		bySSH.Agent, bySSH.Login = nil, key
		return bySSH.Cleanup(ctx)
	})
}

// withRepointer builds the host's Repointer and runs op on it while heartbeating.
func (a *Activities) withRepointer(ctx context.Context, in ESXiInput, op func(*esxi.Repointer) error) error {
	r, err := a.repointer(ctx, in)
	if err != nil {
		return err
	}
	err = heartbeat.While(ctx, func(context.Context) error { return op(r) })
	switch {
	case err == nil:
		return nil
	case errors.Is(err, esxi.ErrHostKeyUnknown) || errors.Is(err, esxi.ErrHostKeyMismatch):
		return nonRetryable(ErrHostKeyRefused, "machine %s: %v", in.Machine, err)
	case errors.Is(err, errAgentAway):
		return nonRetryable(ErrAgentAway, "machine %s: %v", in.Machine, err)
	default:
		return fmt.Errorf("machine %s: %w", in.Machine, err)
	}
}

// repointer reads the machine's address and host key from its region and combines them with
// the worker's configuration.
func (a *Activities) repointer(ctx context.Context, in ESXiInput) (*esxi.Repointer, error) {
	region, err := a.Regions.Region(in.Region)
	if err != nil {
		return nil, err
	}
	hr, ok := region.(HostRegion)
	if !ok {
		return nil, nonRetryable(ErrHostUnusable, "region %s: its client (%T) has no machine secrets or ad-hoc jobs", in.Region, region)
	}
	m, err := hr.GetMachine(ctx, in.Machine)
	if err != nil {
		return nil, classify(err, "get machine %s on %s", in.Machine, in.Region)
	}
	if m.Address == "" {
		return nil, nonRetryable(ErrHostUnusable, "machine %s (%s) has no Address to reach it over SSH", m.Name, m.Uuid)
	}
	if !in.UseAgent && a.ESXi.Login == nil {
		return nil, nonRetryable(ErrHostUnusable, "machine %s (%s) has no agent and this worker has no ESXi login key", m.Name, m.Uuid)
	}
	hostKey := in.HostKey
	if hostKey == "" {
		hostKey, _ = m.Params[ParamSSHHostKey].(string)
	}
	cfg := a.ESXi
	addr := m.Address
	if cfg.Port != 0 {
		addr = net.JoinHostPort(m.Address, strconv.Itoa(cfg.Port))
	}
	r := &esxi.Repointer{
		Host: esxi.Host{
			Addr: addr, User: cfg.User, HostKey: hostKey, AllowTOFU: cfg.AllowTOFU && hostKey == "",
			Paths: cfg.Paths, Commands: cfg.Commands,
		},
		Machine: m.Uuid,
		Secrets: regionSecrets{region: hr},
		Login:   cfg.Login,
	}
	if in.UseAgent {
		r.Agent = adhocRunner{
			region: hr, machine: m.Uuid, poll: orDefault(cfg.AdhocPoll, 2*time.Second),
			timeout: orDefault(cfg.AdhocTimeout, 5*time.Minute), take: orDefault(cfg.AdhocTake, 2*time.Minute),
		}
	}
	return r, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
