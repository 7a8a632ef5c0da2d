package integration

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"golang.org/x/crypto/ssh"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/activities/esxi"
	"github.com/ironflow/ironflow/agent"
	"github.com/ironflow/ironflow/dev"
	"github.com/ironflow/ironflow/dev/sshdtest"
	"github.com/ironflow/ironflow/region/api"
	regionclient "github.com/ironflow/ironflow/region/client"
	"github.com/ironflow/ironflow/workers"
	"github.com/ironflow/ironflow/workflows"
)

// keyRecorder is a region client that remembers every secret the worker stores, so the test
// can try the temporary key after the migration deleted it.
type keyRecorder struct {
	activities.ClientRegion
	keys *recordedKeys
}

type recordedKeys struct {
	mu     sync.Mutex
	values []string
}

func (r keyRecorder) PutSecret(ctx context.Context, key string, s api.Secret) error {
	r.keys.mu.Lock()
	r.keys.values = append(r.keys.values, s.Value)
	r.keys.mu.Unlock()
	return r.ClientRegion.PutSecret(ctx, key, s)
}

func (k *recordedKeys) all() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.values)
}

// esxiHost is an ESXi host simulated on 127.0.0.1: a real sshd, root's authorized keys, the
// agent config and a simulated SSH service (its state independent of the sshd that carries
// the connections), all in a temp dir.
type esxiHost struct {
	sshd   *sshdtest.Server
	svc    *sshdtest.Service
	config string
	keys   []byte // authorized_keys as found
	paths  esxi.Paths
	port   int // of sshd on 127.0.0.1, the machine's Address
}

func newESXiHost(t *testing.T, operator ssh.Signer, running, enabled bool) *esxiHost {
	t.Helper()
	dir := t.TempDir()
	h := &esxiHost{sshd: sshdtest.Start(t, dir), svc: sshdtest.NewService(t, dir, running, enabled), config: filepath.Join(dir, "agent.yaml")}
	if err := os.Mkdir(filepath.Dir(h.sshd.KeysFile), 0o700); err != nil {
		t.Fatal(err)
	}
	// Odd on purpose: a comment, a blank line, no final newline, mode 0640.
	h.keys = []byte("# root keys\n" + sshdtest.AuthorizedLine(operator, "operator") + "\n\n" + sshdtest.AuthorizedLine(sshdtest.NewSigner(t), "someone-else"))
	if err := os.WriteFile(h.sshd.KeysFile, h.keys, 0o640); err != nil {
		t.Fatal(err)
	}
	_, port, err := net.SplitHostPort(h.sshd.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if h.port, err = strconv.Atoi(port); err != nil {
		t.Fatal(err)
	}
	h.paths = esxi.Paths{AuthorizedKeysFile: h.sshd.KeysFile, AgentConfig: h.config, BackupDir: filepath.Join(dir, "ironflow-ssh-backup")}
	return h
}

func (h *esxiHost) commands() esxi.Commands {
	c := h.svc.Command
	return esxi.Commands{Running: c("running"), Enabled: c("enabled"), Start: c("start"), Stop: c("stop"), Enable: c("enable"), Disable: c("disable")}
}

// assertRestored checks that nothing of the migration is left on the host: root's keys are
// back byte for byte with their mode, the SSH service is as found, no backup is left, and
// none of the temporary keys logs in any more (the operator key still does).
func (h *esxiHost) assertRestored(t *testing.T, operator ssh.Signer, running, enabled bool, temporary []string) {
	t.Helper()
	keys, err := os.ReadFile(h.sshd.KeysFile)
	if err != nil || string(keys) != string(h.keys) {
		t.Errorf("authorized_keys after the migration (%v):\n%s\nwant:\n%s", err, keys, h.keys)
	}
	if st, err := os.Stat(h.sshd.KeysFile); err != nil || st.Mode().Perm() != 0o640 {
		t.Errorf("authorized_keys mode: %v %v", st.Mode(), err)
	}
	if r, e := h.svc.State(); r != running || e != enabled {
		t.Errorf("SSH service running=%v enabled=%v, found running=%v enabled=%v", r, e, running, enabled)
	}
	if _, err := os.Stat(h.paths.BackupDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("backup dir left behind: %v", err)
	}
	if len(temporary) == 0 {
		t.Error("no temporary key was made")
	}
	for _, pem := range temporary {
		key, err := ssh.ParsePrivateKey([]byte(pem))
		if err != nil {
			t.Fatal(err)
		}
		if err := h.login(key); err == nil || !strings.Contains(err.Error(), "unable to authenticate") {
			t.Errorf("temporary key after the migration: %v, want an authentication failure", err)
		}
	}
	if err := h.login(operator); err != nil {
		t.Errorf("the operator key no longer logs in: %v", err)
	}
}

func (h *esxiHost) login(key ssh.Signer) error {
	want, _, _, _, err := ssh.ParseAuthorizedKey([]byte(h.sshd.HostKey))
	if err != nil {
		return err
	}
	c, err := ssh.Dial("tcp", h.sshd.Addr, &ssh.ClientConfig{User: "root", Auth: []ssh.AuthMethod{ssh.PublicKeys(key)}, HostKeyCallback: ssh.FixedHostKey(want), Timeout: 10 * time.Second})
	if err != nil {
		return err
	}
	return c.Close()
}

// startESXiWorker runs the migration worker of the stack with the ESXi configuration of host
// (operator key, paths and service commands of the simulated host) and a key recorder.
func startESXiWorker(t *testing.T, s *dev.Stack, cfg activities.ESXiConfig) *recordedKeys {
	t.Helper()
	keys := &recordedKeys{}
	regions, err := activities.NewRegions(s.RegionsConfig(), func(rc activities.RegionConfig) activities.Region {
		return keyRecorder{ClientRegion: activities.DialClient(rc).(activities.ClientRegion), keys: keys}
	})
	if err != nil {
		t.Fatal(err)
	}
	w := workers.NewMigrationWorker(s.Client, &activities.Activities{Regions: regions, ESXi: cfg})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return keys
}

func assertSecretGone(ctx context.Context, t *testing.T, c *regionclient.Client, machine string) {
	t.Helper()
	_, err := c.GetSecret(ctx, machine, esxi.SecretParamPrivateKey)
	var apiErr *regionclient.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Errorf("temporary key of %s on the region: %v, want 404", machine, err)
	}
}

func assertConfigNames(t *testing.T, path, endpoint string) {
	t.Helper()
	cfg, err := agent.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Endpoints, []string{endpoint}) {
		t.Errorf("agent config %s names %v, want only %s", path, cfg.Endpoints, endpoint)
	}
}

// One run migrates a Linux machine whose agent follows the redirect and an ESXi host
// repointed over SSH with the worker's operator key, through Temporal, between two real
// regions.
func TestMigrateLinuxAndESXiMachines(t *testing.T) {
	s := startStack(t, dev.StackOptions{})
	ctx := context.Background()
	ra, rb := regionClient(s, "region-a"), regionClient(s, "region-b")
	urlA, urlB := s.Regions["region-a"].URL, s.Regions["region-b"].URL
	putTasks(t, rb, helloTask)

	// The ESXi host's SSH service was found stopped and disabled: Prepare must start it and
	// Cleanup put it back so.
	operator := sshdtest.NewSigner(t)
	host := newESXiHost(t, operator, false, false)
	keys := startESXiWorker(t, s, activities.ESXiConfig{Login: operator, Port: host.port, Paths: host.paths, Commands: host.commands()})

	linux := agentMachine(t, ra, api.Machine{Name: "linux1", OS: "ubuntu-24.04"})
	linuxCfg := filepath.Join(t.TempDir(), "agent.yaml")
	agentConfigFile(t, linuxCfg, linux, urlA)
	startAgent(t, linuxCfg)
	pollUntil(t, 30*time.Second, "linux1 checks in", func() (bool, error) {
		m, err := ra.Machines().Get(ctx, linux.Uuid)
		return err == nil && m.Meta[api.MetaAgentLastSeen] != "", err
	})

	esx := agentMachine(t, ra, api.Machine{
		Name: "esx1", OS: "esxi-8.0u2", Address: "127.0.0.1",
		Params: map[string]any{activities.ParamSSHHostKey: host.sshd.HostKey},
	})
	agentConfigFile(t, host.config, esx, urlA, "http://rack-1.example:5248")

	runs := map[string]client.WorkflowRun{}
	for _, m := range []api.Machine{linux, esx} {
		in := workflows.MigrateMachineInput{SourceRegion: "region-a", TargetRegion: "region-b", Machine: m.Uuid, AgentCheckInTimeout: time.Minute}
		runs[m.Name] = startMigration(ctx, t, s, in)
	}
	for _, m := range []api.Machine{linux, esx} {
		res := awaitMigration(t, s, runs[m.Name])
		if !res.AgentRepointed {
			t.Errorf("%s: result %+v", m.Name, res)
		}
		assertActiveOnExactlyOne(ctx, t, s, m.Uuid, "region-b")
	}

	assertConfigNames(t, host.config, urlB)
	assertConfigNames(t, linuxCfg, urlB)
	host.assertRestored(t, operator, false, false, keys.all())
	assertSecretGone(ctx, t, rb, esx.Uuid)
	assertSecretGone(ctx, t, ra, esx.Uuid)

	// The Linux agent takes its next job from region-b.
	job, log := waitJobEnd(t, rb, newJob(t, rb, linux, "hello").Uuid)
	if job.State != api.JobFinished || !strings.Contains(log, "hello from") {
		t.Errorf("linux1 job on region-b: %+v, log %q", job, log)
	}
}

// esxiWithAgent is an ESXi host on region-a whose agent runs and has checked in; no operator
// key is configured, so the agent runs the host-side steps.
// take bounds the worker's wait for the agent to take an ad-hoc job.
func esxiWithAgent(t *testing.T, s *dev.Stack, take time.Duration, running, enabled bool) (*esxiHost, api.Machine, ssh.Signer, *recordedKeys, func()) {
	t.Helper()
	ra := regionClient(s, "region-a")
	operator := sshdtest.NewSigner(t) // authorized on the host, unknown to the worker
	host := newESXiHost(t, operator, running, enabled)
	keys := startESXiWorker(t, s, activities.ESXiConfig{Port: host.port, Paths: host.paths, Commands: host.commands(), AdhocPoll: 200 * time.Millisecond, AdhocTake: take})
	esx := agentMachine(t, ra, api.Machine{
		Name: "esx2", OS: "ESXi-7.0U3", Address: "127.0.0.1",
		Params: map[string]any{activities.ParamSSHHostKey: host.sshd.HostKey},
	})
	agentConfigFile(t, host.config, esx, s.Regions["region-a"].URL)
	stop := startAgent(t, host.config)
	pollUntil(t, 30*time.Second, "esx2's agent checks in", func() (bool, error) {
		m, err := ra.Machines().Get(context.Background(), esx.Uuid)
		return err == nil && m.Meta[api.MetaAgentLastSeen] != "", err
	})
	return host, esx, operator, keys, stop
}

// An ESXi host whose agent checked in has its host-side steps (start SSH, add and remove the
// temporary key) run as ad-hoc jobs of that agent on the destination. (This agent also
// follows the redirect itself, so the config check here does not tell the two rewrites apart;
// TestMigrateLinuxAndESXiMachines does.)
func TestMigrateESXiWithAgent(t *testing.T) {
	s := startStack(t, dev.StackOptions{})
	ctx := context.Background()
	rb := regionClient(s, "region-b")
	host, esx, operator, keys, _ := esxiWithAgent(t, s, 30*time.Second, false, true)

	in := workflows.MigrateMachineInput{SourceRegion: "region-a", TargetRegion: "region-b", Machine: esx.Uuid, AgentCheckInTimeout: time.Minute}
	res := awaitMigration(t, s, startMigration(ctx, t, s, in))
	if !res.AgentRepointed {
		t.Errorf("result %+v", res)
	}
	assertActiveOnExactlyOne(ctx, t, s, esx.Uuid, "region-b")
	assertConfigNames(t, host.config, s.Regions["region-b"].URL)
	host.assertRestored(t, operator, false, true, keys.all())
	assertSecretGone(ctx, t, rb, esx.Uuid)

	adhoc := 0
	for _, j := range listJobs(ctx, t, rb, esx.Uuid) {
		if strings.HasPrefix(j.Task, api.AdhocTaskPrefix) {
			adhoc++
			if j.State != api.JobFinished {
				t.Errorf("ad-hoc job %s: %s %s", j.Uuid, j.State, j.ExitState)
			}
		}
	}
	// Prepare: inspect, back up and start SSH, add the key; Cleanup: restore.
	if adhoc != 4 {
		t.Errorf("%d ad-hoc jobs ran on region-b, want 4", adhoc)
	}
}

// When the ESXi host's agent is gone, the migration fails for good and is undone: the machine
// is live on region-a again, nothing is left on region-b, the host and its config are as found.
func TestMigrateESXiAgentGoneIsCompensated(t *testing.T) {
	s := startStack(t, dev.StackOptions{})
	ctx := context.Background()
	host, esx, _, keys, stopAgent := esxiWithAgent(t, s, 2*time.Second, false, true)
	stopAgent()
	configBefore, err := os.ReadFile(host.config)
	if err != nil {
		t.Fatal(err)
	}

	in := workflows.MigrateMachineInput{SourceRegion: "region-a", TargetRegion: "region-b", Machine: esx.Uuid, AgentCheckInTimeout: time.Minute}
	err = startMigration(ctx, t, s, in).Get(ctx, nil)
	if err == nil || !strings.Contains(err.Error(), activities.ErrAgentAway) {
		t.Fatalf("migration error %v, want %s", err, activities.ErrAgentAway)
	}
	assertActiveOnExactlyOne(ctx, t, s, esx.Uuid, "region-a")
	if got, _ := os.ReadFile(host.sshd.KeysFile); string(got) != string(host.keys) {
		t.Errorf("authorized_keys changed:\n%s", got)
	}
	if r, e := host.svc.State(); r || !e {
		t.Errorf("SSH service running=%v enabled=%v, want as found (stopped, enabled)", r, e)
	}
	if after, _ := os.ReadFile(host.config); string(after) != string(configBefore) {
		t.Errorf("agent config changed:\n%s", after)
	}
	if n := len(keys.all()); n != 0 {
		t.Errorf("%d temporary keys were made for a host whose agent is gone", n)
	}
	// Finalize ran, so the source may have sent the agent to region-b: what is left there is
	// a locked stub sending it back.
	if m, err := regionClient(s, "region-b").Machines().Get(ctx, esx.Uuid); err == nil && (!m.Locked || m.Runnable || m.Meta[api.MetaRedirectEndpoint] != s.Regions["region-a"].URL) {
		t.Errorf("region-b holds %+v, want nothing or a stub redirecting to region-a", m)
	}
}
