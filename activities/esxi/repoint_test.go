package esxi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ironflow/ironflow/agent"
	"github.com/ironflow/ironflow/dev/sshdtest"
)

const (
	testMachine = "0b9e2f4c-6a53-4d1e-8f0a-3c2b1d4e5f60"
	oldEndpoint = "http://old-region:5240"
	newEndpoint = "https://new-region:5240"
)

// localRunner stands in for the machine agent: like it, it runs scripts with /bin/sh -c on
// the host, which here is the machine sshd runs on.
type localRunner struct {
	mu   sync.Mutex
	runs int
}

func (l *localRunner) Run(ctx context.Context, script string) ([]byte, error) {
	l.mu.Lock()
	l.runs++
	l.mu.Unlock()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", script)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

func (l *localRunner) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.runs
}

// memSecrets is a SecretStore that remembers every key it was given, so the test can try a
// temporary key after Cleanup deleted it.
type memSecrets struct {
	mu     sync.Mutex
	values map[string]string
	given  []string
	setErr error
}

func (m *memSecrets) GetSecretParam(_ context.Context, machine, name string) (string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.values[machine+"/"+name]
	return v, ok, nil
}

func (m *memSecrets) SetSecretParam(_ context.Context, machine, name, value string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.setErr != nil {
		return m.setErr
	}
	m.values[machine+"/"+name] = value
	m.given = append(m.given, value)
	return nil
}

func (m *memSecrets) DeleteSecretParam(_ context.Context, machine, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.values, machine+"/"+name)
	return nil
}

func (m *memSecrets) snapshot() (stored int, given []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.values), slices.Clone(m.given)
}

// scenario is the host as the migration finds it.
type scenario struct {
	keys     bool // root has an authorized_keys file (with the operator key, no final newline)
	running  bool // SSH service state
	enabled  bool
	useAgent bool // an agent runs on the host; otherwise the operator key logs in
}

var (
	stoppedWithKeys = scenario{keys: true, useAgent: true}
	runningNoKeys   = scenario{running: true, enabled: true, useAgent: true}
	noAgent         = scenario{keys: true, running: true}
)

// env is one host: a real sshd, a simulated SSH service (state files driven by shell
// commands) and the files the migration touches, all in a temp dir.
type env struct {
	dir      string
	sshd     *sshd
	host     Host
	agent    *localRunner
	secrets  *memSecrets
	operator ssh.Signer
	sc       scenario
}

func newEnv(t *testing.T, sc scenario) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{dir: dir, sshd: startSSHD(t, dir), agent: &localRunner{}, secrets: &memSecrets{values: map[string]string{}}, operator: sshdtest.NewSigner(t), sc: sc}
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	svc := sshdtest.NewService(t, dir, sc.running, sc.enabled)
	cmd := svc.Command

	if err := os.Mkdir(filepath.Dir(e.sshd.keysFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if sc.keys {
		other := sshdtest.NewSigner(t)
		writeFile(t, e.sshd.keysFile, "# root keys\n"+sshdtest.AuthorizedLine(e.operator, "operator")+"\n\n"+sshdtest.AuthorizedLine(other, "someone-else"), 0o640)
	}
	agentConfig := filepath.Join(dir, "agent.yaml")
	err = agent.WriteConfig(agentConfig, agent.Config{
		Endpoints: []string{oldEndpoint, "http://old-rack:5248"}, Machine: testMachine, Secret: "machine-secret",
		PollWait: 30 * time.Second, JobTimeout: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.host = Host{
		Addr:    e.sshd.addr,
		User:    u.Username,
		HostKey: e.sshd.hostKey,
		Paths:   Paths{AuthorizedKeysFile: e.sshd.keysFile, AgentConfig: agentConfig, BackupDir: filepath.Join(dir, "backup")},
		Commands: Commands{
			Running: cmd("running"), Enabled: cmd("enabled"),
			Start: cmd("start"), Stop: cmd("stop"), Enable: cmd("enable"), Disable: cmd("disable"),
		},
	}
	return e
}

func (e *env) repointer() *Repointer {
	r := &Repointer{Host: e.host, Machine: testMachine, Secrets: e.secrets}
	if e.sc.useAgent {
		r.Agent = e.agent
	} else {
		r.Login = e.operator
	}
	return r
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func absent(path string) bool {
	_, err := os.Stat(path)
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// hostState is everything the migration must leave as it found it.
type hostState struct {
	files   map[string]string // path -> content, "<absent>" when missing
	modes   map[string]os.FileMode
	running bool
	enabled bool
}

func (e *env) state(t *testing.T) hostState {
	t.Helper()
	s := hostState{files: map[string]string{}, modes: map[string]os.FileMode{}}
	for _, p := range []string{e.sshd.keysFile, e.host.Paths.AuthorizedKeysFile} {
		data, err := os.ReadFile(p)
		switch {
		case errors.Is(err, os.ErrNotExist):
			s.files[p] = "<absent>"
		case err != nil:
			t.Fatal(err)
		default:
			s.files[p] = string(data)
			st, _ := os.Stat(p)
			s.modes[p] = st.Mode()
		}
	}
	_, err := os.Stat(filepath.Join(e.dir, "svc", "running"))
	s.running = err == nil
	_, err = os.Stat(filepath.Join(e.dir, "svc", "enabled"))
	s.enabled = err == nil
	return s
}

func (s hostState) equal(o hostState) bool {
	return fmt.Sprint(s.files) == fmt.Sprint(o.files) && fmt.Sprint(s.modes) == fmt.Sprint(o.modes) &&
		s.running == o.running && s.enabled == o.enabled
}

// login tries key on the sshd, trusting its real host key.
func (e *env) login(t *testing.T, key ssh.Signer) error {
	t.Helper()
	h := e.host
	h.HostKey, h.AllowTOFU = e.sshd.hostKey, false
	h, err := h.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := h.trust()
	if err != nil {
		t.Fatal(err)
	}
	return withSSH(context.Background(), h, tr, key, func(run sshRunner) error {
		_, err := run.Run(context.Background(), "true")
		return err
	})
}

func parseKey(t *testing.T, pemKey string) ssh.Signer {
	t.Helper()
	s, err := ssh.ParsePrivateKey([]byte(pemKey))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// assertRestored checks the host is back as found and nothing of the migration is left.
func (e *env) assertRestored(t *testing.T, before hostState) {
	t.Helper()
	if after := e.state(t); !after.equal(before) {
		t.Errorf("host not restored:\n before %+v\n after  %+v", before, after)
	}
	if !absent(e.host.Paths.BackupDir) {
		t.Error("backup dir left behind")
	}
	stored, given := e.secrets.snapshot()
	if stored != 0 {
		t.Error("temporary private key still in the secret store")
	}
	for _, k := range given {
		if err := e.login(t, parseKey(t, k)); err == nil || !strings.Contains(err.Error(), "unable to authenticate") {
			t.Errorf("temporary key after cleanup: login error %v, want an authentication failure", err)
		}
	}
}

func TestRepointRestoresHost(t *testing.T) {
	tests := []struct {
		name         string
		sc           scenario
		inject       func(t *testing.T, e *env)
		failAt       string // "prepare", "rewrite", "cleanup" (once) or "" for success
		wantErr      string
		prepareTwice bool
	}{
		{name: "success: SSH stopped and disabled, agent", sc: stoppedWithKeys},
		{name: "success: SSH running, no keys file, agent", sc: runningNoKeys},
		{name: "success: no agent, operator key", sc: noAgent},
		{name: "success: Prepare retried", sc: stoppedWithKeys, prepareTwice: true},
		{
			name: "secret store fails", sc: stoppedWithKeys, failAt: "prepare", wantErr: "store temporary key",
			inject: func(_ *testing.T, e *env) { e.secrets.setErr = errors.New("region down") },
		},
		{
			name: "backup fails", sc: stoppedWithKeys, failAt: "prepare", wantErr: "back up keys",
			inject: func(t *testing.T, e *env) {
				blocker := filepath.Join(e.dir, "not-a-dir")
				writeFile(t, blocker, "", 0o644)
				e.host.Paths.BackupDir = filepath.Join(blocker, "backup")
			},
		},
		{
			name: "enable fails", sc: stoppedWithKeys, failAt: "prepare", wantErr: "command failed",
			inject: func(_ *testing.T, e *env) { e.host.Commands.Enable = "false" },
		},
		{
			name: "start fails", sc: stoppedWithKeys, failAt: "prepare", wantErr: "command failed",
			inject: func(_ *testing.T, e *env) { e.host.Commands.Start = "exit 3" },
		},
		{
			name: "SSH does not start", sc: stoppedWithKeys, failAt: "prepare", wantErr: "did not start",
			inject: func(_ *testing.T, e *env) { e.host.Commands.Start = "true" },
		},
		{
			// With SSH stopped the host key can only be seen once SSH runs: the key is
			// then refused before the temporary key is added.
			name: "wrong host key once SSH started", sc: stoppedWithKeys, failAt: "prepare", wantErr: "does not match",
			inject: func(t *testing.T, e *env) {
				e.host.HostKey = sshdtest.AuthorizedLine(sshdtest.NewSigner(t), "impostor")
			},
		},
		{
			name: "adding the key fails", sc: runningNoKeys, failAt: "prepare", wantErr: "add temporary key",
			inject: func(_ *testing.T, e *env) {
				e.host.Paths.AuthorizedKeysFile = filepath.Join(e.dir, "missing-dir", "authorized_keys")
			},
		},
		{
			name: "sshd refuses the temporary key", sc: stoppedWithKeys, failAt: "prepare", wantErr: "does not log in",
			inject: func(_ *testing.T, e *env) {
				e.host.Paths.AuthorizedKeysFile = filepath.Join(e.dir, "keys", "not-read-by-sshd")
			},
		},
		{
			name: "agent config missing", sc: stoppedWithKeys, failAt: "rewrite", wantErr: "read agent config",
			inject: func(t *testing.T, e *env) {
				if err := os.Remove(e.host.Paths.AgentConfig); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "agent config corrupt", sc: noAgent, failAt: "rewrite", wantErr: "not a valid agent config",
			inject: func(t *testing.T, e *env) { writeFile(t, e.host.Paths.AgentConfig, "endpoints: [", 0o600) },
		},
		{
			name: "cleanup fails once, then retried", sc: stoppedWithKeys, failAt: "cleanup", wantErr: "restore keys",
			inject: func(t *testing.T, e *env) {
				once := filepath.Join(e.dir, "fail-stop-once")
				writeFile(t, once, "", 0o644)
				e.host.Commands.Stop = fmt.Sprintf("if [ -e %[1]s ]; then rm %[1]s; exit 1; fi; %[2]s", once, e.host.Commands.Stop)
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each case has its own sshd and temp dir
			ctx := context.Background()
			e := newEnv(t, tc.sc)
			if tc.inject != nil {
				tc.inject(t, e)
			}
			before := e.state(t)
			r := e.repointer()
			wantFail := func(op string, err error) bool {
				t.Helper()
				if tc.failAt != op {
					if err != nil {
						t.Fatalf("%s: %v", op, err)
					}
					return false
				}
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%s = %v, want an error containing %q", op, err, tc.wantErr)
				}
				return true
			}

			prepared, err := r.Prepare(ctx)
			if tc.prepareTwice && err == nil {
				prepared, err = r.Prepare(ctx)
			}
			if !wantFail("prepare", err) {
				e.checkPrepared(t, prepared)
				err := r.RewriteAgentConfig(ctx, newEndpoint)
				if !wantFail("rewrite", err) {
					e.checkRewritten(t, r)
				}
			}
			if err := r.Cleanup(ctx); wantFail("cleanup", err) {
				if err := r.Cleanup(ctx); err != nil {
					t.Fatalf("retried cleanup: %v", err)
				}
			}
			e.assertRestored(t, before)
			if err := r.Cleanup(ctx); err != nil { // the compensation may run again
				t.Fatalf("second cleanup: %v", err)
			}
			e.assertRestored(t, before)
		})
	}
}

// checkPrepared: the temporary key is in place exactly once, logs in, and SSH runs.
func (e *env) checkPrepared(t *testing.T, p Prepared) {
	t.Helper()
	if p.HostKey != e.sshd.hostKey {
		t.Errorf("Prepared.HostKey = %q, want %q", p.HostKey, e.sshd.hostKey)
	}
	data, err := os.ReadFile(e.host.Paths.AuthorizedKeysFile)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), p.PublicKey+"\n"); n != 1 {
		t.Errorf("temporary key appears %d times in authorized_keys:\n%s", n, data)
	}
	_, given := e.secrets.snapshot()
	if len(given) != 1 {
		t.Fatalf("%d temporary keys were stored, want 1", len(given))
	}
	if strings.Contains(fmt.Sprintf("%+v", p), "PRIVATE KEY") {
		t.Error("Prepared carries the private key")
	}
	if err := e.login(t, parseKey(t, given[0])); err != nil {
		t.Errorf("temporary key does not log in after Prepare: %v", err)
	}
	if !e.state(t).running {
		t.Error("SSH service not running after Prepare")
	}
}

// checkRewritten: the host's agent config names only the new endpoint and keeps the rest;
// a second rewrite changes nothing.
func (e *env) checkRewritten(t *testing.T, r *Repointer) {
	t.Helper()
	path := e.host.Paths.AgentConfig
	cfg, err := agent.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Endpoints, []string{newEndpoint}) || cfg.Machine != testMachine || cfg.Secret != "machine-secret" || cfg.JobTimeout != time.Hour {
		t.Errorf("rewritten agent config = %+v", cfg)
	}
	st1, _ := os.Stat(path)
	if st1.Mode().Perm() != 0o600 {
		t.Errorf("agent config mode %v, want 0600", st1.Mode().Perm())
	}
	if err := r.RewriteAgentConfig(context.Background(), newEndpoint); err != nil {
		t.Fatalf("second rewrite: %v", err)
	}
	if st2, _ := os.Stat(path); !os.SameFile(st1, st2) {
		t.Error("a rewrite to the same endpoint replaced the file")
	}
	if matches, _ := filepath.Glob(path + ".ironflow-tmp*"); len(matches) != 0 {
		t.Errorf("temp files left: %v", matches)
	}
}

func TestHostKeyChecked(t *testing.T) {
	wrong := sshdtest.AuthorizedLine(sshdtest.NewSigner(t), "impostor")
	tests := []struct {
		name    string
		sc      scenario
		hostKey string
		tofu    bool
		want    error
	}{
		{"wrong key, agent", runningNoKeys, wrong, false, ErrHostKeyMismatch},
		{"wrong key, no agent", noAgent, wrong, false, ErrHostKeyMismatch},
		{"wrong key even with TOFU", runningNoKeys, wrong, true, ErrHostKeyMismatch},
		{"unknown key without TOFU", runningNoKeys, "", false, ErrHostKeyUnknown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, tc.sc)
			e.host.HostKey, e.host.AllowTOFU = tc.hostKey, tc.tofu
			before := e.state(t)
			r := e.repointer()
			_, err := r.Prepare(context.Background())
			if !errors.Is(err, tc.want) {
				t.Fatalf("Prepare = %v, want %v", err, tc.want)
			}
			if after := e.state(t); !after.equal(before) {
				t.Errorf("host changed:\n before %+v\n after  %+v", before, after)
			}
			if !absent(e.host.Paths.BackupDir) {
				t.Error("a backup was made before the host key was checked")
			}
			if _, given := e.secrets.snapshot(); len(given) != 0 {
				t.Error("a temporary key was made before the host key was checked")
			}
			if n := e.agent.count(); n > 1 {
				t.Errorf("the agent ran %d scripts, only the read-only inspection was allowed", n)
			}
			if err := r.RewriteAgentConfig(context.Background(), newEndpoint); err == nil {
				t.Error("RewriteAgentConfig worked against a refused host")
			}
		})
	}
}

func TestTOFURecordsHostKey(t *testing.T) {
	e := newEnv(t, stoppedWithKeys)
	e.host.HostKey, e.host.AllowTOFU = "", true
	before := e.state(t)
	r := e.repointer()
	p, err := r.Prepare(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if p.HostKey != e.sshd.hostKey {
		t.Fatalf("TOFU recorded %q, want the server's %q", p.HostKey, e.sshd.hostKey)
	}
	// Later steps run with the recorded key and without TOFU.
	r.Host.HostKey, r.Host.AllowTOFU = p.HostKey, false
	if err := r.RewriteAgentConfig(context.Background(), newEndpoint); err != nil {
		t.Fatal(err)
	}
	if err := r.Cleanup(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.assertRestored(t, before)
}

func TestBadInputRefused(t *testing.T) {
	good := Host{Addr: "127.0.0.1:1", HostKey: sshdtest.AuthorizedLine(sshdtest.NewSigner(t), "h")}
	tests := []struct {
		name    string
		mutate  func(r *Repointer)
		wantErr string
	}{
		{"machine not a UUID", func(r *Repointer) { r.Machine = "birdy\nssh-rsa AAAA evil" }, "machine"},
		{"no secret store", func(r *Repointer) { r.Secrets = nil }, "secret store required"},
		{"no address", func(r *Repointer) { r.Host.Addr = "" }, "address required"},
		{"relative path", func(r *Repointer) { r.Host.Paths.AgentConfig = "etc/agent.yaml" }, "must be absolute"},
		{"garbled host key", func(r *Repointer) { r.Host.HostKey = "ssh-ed25519 !!!" }, "recorded host key"},
		{"no agent and no login", func(r *Repointer) { r.Agent = nil }, "no login key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			runner := &localRunner{}
			r := &Repointer{Host: good, Machine: testMachine, Secrets: &memSecrets{values: map[string]string{}}, Agent: runner}
			tc.mutate(r)
			for op, run := range map[string]func() error{
				"Prepare": func() error { _, err := r.Prepare(context.Background()); return err },
				"Cleanup": func() error { return r.Cleanup(context.Background()) },
			} {
				if err := run(); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("%s = %v, want an error containing %q", op, err, tc.wantErr)
				}
			}
			if runner.count() != 0 {
				t.Error("bad input reached the host")
			}
		})
	}
	r := &Repointer{Host: good, Machine: testMachine, Secrets: &memSecrets{values: map[string]string{}}}
	if err := r.RewriteAgentConfig(context.Background(), "ftp://new"); err == nil || !strings.Contains(err.Error(), "new agent endpoint") {
		t.Errorf("RewriteAgentConfig(ftp://new) = %v", err)
	}
}

func TestParseRunning(t *testing.T) {
	tests := []struct {
		out     string
		want    bool
		wantErr bool
	}{
		{"running=yes\n", true, false},
		{"running=no\n", false, false},
		{"agent: starting job\nrunning=yes\n", true, false},
		{"", false, true},
		{"running=maybe\n", false, true},
	}
	for _, tc := range tests {
		got, err := parseRunning([]byte(tc.out))
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("parseRunning(%q) = %v, %v; want %v, error %v", tc.out, got, err, tc.want, tc.wantErr)
		}
	}
}
