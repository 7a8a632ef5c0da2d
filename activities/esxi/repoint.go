package esxi

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
	"golang.org/x/crypto/ssh"

	"github.com/ironflow/ironflow/agent"
)

// SecretParamPrivateKey is the machine secret param holding the temporary private key, as in
// DRP's migrate-machine.
const SecretParamPrivateKey = "migrate-machine/esxi-ssh-priv-key"

// SecretStore keeps the temporary private key on the machine's secret params, out of workflow
// history.
type SecretStore interface {
	GetSecretParam(ctx context.Context, machine, name string) (value string, found bool, err error)
	SetSecretParam(ctx context.Context, machine, name, value string) error
	DeleteSecretParam(ctx context.Context, machine, name string) error // nil when absent
}

// Runner runs a shell script on the host with /bin/sh -c and returns its stdout; a non-zero
// exit is an error. The machine agent is one when it runs on the host.
type Runner interface {
	Run(ctx context.Context, script string) (stdout []byte, err error)
}

// Repointer moves one host's agent config to a new endpoint. Prepare, RewriteAgentConfig and
// Cleanup are each idempotent; Cleanup is also the compensation of the other two.
type Repointer struct {
	Host    Host
	Machine string      // machine UUID, the key of the secret param
	Secrets SecretStore // where the temporary private key lives
	// Agent runs the host-side steps when an agent runs on the host (it can start sshd).
	// Without one, sshd must already run and Login (an operator key from the worker
	// configuration) must be authorized for Host.User.
	Agent Runner
	Login ssh.Signer
}

// Prepared is safe to keep in workflow history: it holds public keys only.
type Prepared struct {
	HostKey   string // the verified host key; record it when trust on first use accepted it
	PublicKey string // the temporary key's authorized_keys line
}

// Prepare records the SSH service state and root's authorized keys on the host, starts SSH if
// it was not running, adds a temporary key (kept in the secret store) and checks that it logs
// in. When SSH already runs, the host key is checked before anything is changed.
func (r *Repointer) Prepare(ctx context.Context) (Prepared, error) {
	h, t, err := r.setup()
	if err != nil {
		return Prepared{}, err
	}
	boot, done, err := r.bootstrap(ctx, h, t)
	if err != nil {
		return Prepared{}, err
	}
	defer done()
	out, err := boot.Run(ctx, h.inspectScript())
	if err != nil {
		return Prepared{}, fmt.Errorf("esxi %s: inspect: %w", h.Addr, err)
	}
	running, err := parseRunning(out)
	if err != nil {
		return Prepared{}, fmt.Errorf("esxi %s: inspect: %w", h.Addr, err)
	}
	if running {
		if err := verifyHostKey(ctx, h, t); err != nil {
			return Prepared{}, err
		}
	}
	signer, err := r.tempKey(ctx, true)
	if err != nil {
		return Prepared{}, err
	}
	if _, err := boot.Run(ctx, h.snapshotScript()); err != nil {
		return Prepared{}, fmt.Errorf("esxi %s: back up keys and start SSH: %w", h.Addr, err)
	}
	if !running {
		if err := verifyHostKey(ctx, h, t); err != nil {
			return Prepared{}, err
		}
	}
	pub := authorizedLine(signer, r.Machine)
	if _, err := boot.Run(ctx, h.appendKeyScript(pub)); err != nil {
		return Prepared{}, fmt.Errorf("esxi %s: add temporary key: %w", h.Addr, err)
	}
	err = withSSH(ctx, h, t, signer, func(run sshRunner) error {
		_, err := run.Run(ctx, "true")
		return err
	})
	if err != nil {
		return Prepared{}, fmt.Errorf("esxi %s: temporary key does not log in: %w", h.Addr, err)
	}
	return Prepared{HostKey: t.key(), PublicKey: pub}, nil
}

// RewriteAgentConfig points the host's agent config at endpoint alone, over SSH with the
// temporary key; the file is replaced atomically and the rest of it is kept.
func (r *Repointer) RewriteAgentConfig(ctx context.Context, endpoint string) error {
	if err := agent.ValidateEndpoint(endpoint); err != nil {
		return fmt.Errorf("esxi: new agent endpoint: %w", err)
	}
	h, t, err := r.setup()
	if err != nil {
		return err
	}
	signer, err := r.tempKey(ctx, false)
	if err != nil {
		return err
	}
	path := h.Paths.AgentConfig
	return withSSH(ctx, h, t, signer, func(run sshRunner) error {
		data, err := run.Run(ctx, "cat -- "+shellQuote(path))
		if err != nil {
			return fmt.Errorf("read agent config %s: %w", path, err)
		}
		cfg, err := agent.ParseConfig(data)
		if err != nil {
			return fmt.Errorf("agent config %s on %s: %w", path, h.Addr, err)
		}
		next := cfg.WithEndpoint(endpoint)
		if slices.Equal(cfg.Endpoints, next.Endpoints) {
			return nil
		}
		content, err := next.Marshal()
		if err != nil {
			return err
		}
		if _, err := run.Run(ctx, writeFileScript(path, content)); err != nil {
			return fmt.Errorf("write agent config %s: %w", path, err)
		}
		return nil
	})
}

// Cleanup removes every trace of the migration from the host: root's authorized keys are
// restored byte for byte (or removed if there were none), the SSH service is returned to the
// state found, the backup and the secret param are deleted.
func (r *Repointer) Cleanup(ctx context.Context) error {
	h, t, err := r.setup()
	if err != nil {
		return err
	}
	boot, done, err := r.bootstrap(ctx, h, t)
	if err != nil {
		return err
	}
	defer done()
	if _, err := boot.Run(ctx, h.restoreScript()); err != nil {
		return fmt.Errorf("esxi %s: restore keys and SSH service: %w", h.Addr, err)
	}
	if err := r.Secrets.DeleteSecretParam(ctx, r.Machine, SecretParamPrivateKey); err != nil {
		return fmt.Errorf("esxi: delete temporary key of machine %s: %w", r.Machine, err)
	}
	return nil
}

func (r *Repointer) setup() (Host, *trust, error) {
	if r.Secrets == nil {
		return Host{}, nil, errors.New("esxi: secret store required")
	}
	// The UUID also names the temporary key inside authorized_keys: no room for odd bytes.
	if _, err := uuid.Parse(r.Machine); err != nil {
		return Host{}, nil, fmt.Errorf("esxi: machine %q: %w", r.Machine, err)
	}
	h, err := r.Host.withDefaults()
	if err != nil {
		return Host{}, nil, err
	}
	t, err := h.trust()
	return h, t, err
}

// bootstrap returns what runs the host-side steps: the agent, or SSH with the login key.
func (r *Repointer) bootstrap(ctx context.Context, h Host, t *trust) (Runner, func(), error) {
	switch {
	case r.Agent != nil:
		return r.Agent, func() {}, nil
	case r.Login != nil:
		c, err := dial(ctx, h, t, r.Login)
		if err != nil {
			return nil, nil, fmt.Errorf("esxi %s: no agent, login failed: %w", h.Addr, err)
		}
		return sshRunner{addr: h.Addr, client: c}, func() { c.Close() }, nil
	default:
		return nil, nil, fmt.Errorf("esxi %s: no agent runs on the host and no login key is configured", h.Addr)
	}
}

// parseRunning reads the inspect script's answer; an agent may mix other output into it.
func parseRunning(out []byte) (bool, error) {
	for _, line := range strings.Split(string(out), "\n") {
		switch strings.TrimSpace(line) {
		case "running=yes":
			return true, nil
		case "running=no":
			return false, nil
		}
	}
	return false, fmt.Errorf("no SSH service state in %q", out)
}

// verifyHostKey checks the host key unless this operation already saw it.
func verifyHostKey(ctx context.Context, h Host, t *trust) error {
	if verified, _ := t.verdict(); verified {
		return nil
	}
	_, err := dial(ctx, h, t, nil)
	return err
}

func withSSH(ctx context.Context, h Host, t *trust, signer ssh.Signer, fn func(sshRunner) error) error {
	c, err := dial(ctx, h, t, signer)
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(sshRunner{addr: h.Addr, client: c})
}

// tempKey returns the machine's temporary key, creating and storing it when create is set.
// Reusing a stored key keeps a retried Prepare from adding a second one.
func (r *Repointer) tempKey(ctx context.Context, create bool) (ssh.Signer, error) {
	value, found, err := r.Secrets.GetSecretParam(ctx, r.Machine, SecretParamPrivateKey)
	if err != nil {
		return nil, fmt.Errorf("esxi: read temporary key of machine %s: %w", r.Machine, err)
	}
	if !found {
		if !create {
			return nil, fmt.Errorf("esxi: machine %s has no temporary key: Prepare did not run", r.Machine)
		}
		if value, err = newPrivateKey(r.Machine); err != nil {
			return nil, err
		}
		if err := r.Secrets.SetSecretParam(ctx, r.Machine, SecretParamPrivateKey, value); err != nil {
			return nil, fmt.Errorf("esxi: store temporary key of machine %s: %w", r.Machine, err)
		}
	}
	signer, err := ssh.ParsePrivateKey([]byte(value))
	if err != nil {
		return nil, fmt.Errorf("esxi: temporary key of machine %s: %w", r.Machine, err)
	}
	return signer, nil
}

func keyComment(machine string) string { return "ironflow-migrate-" + machine }

func newPrivateKey(machine string) (string, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", fmt.Errorf("esxi: generate temporary key: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, keyComment(machine))
	if err != nil {
		return "", fmt.Errorf("esxi: encode temporary key: %w", err)
	}
	return string(pem.EncodeToMemory(block)), nil
}

// authorizedLine is the key's authorized_keys line, named so an operator sees whose it is.
func authorizedLine(signer ssh.Signer, machine string) string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))) + " " + keyComment(machine)
}
