package activities_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"golang.org/x/crypto/ssh"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/activities/esxi"
	"github.com/ironflow/ironflow/agent"
	"github.com/ironflow/ironflow/dev/sshdtest"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

func TestValidateChoosesRepointMethod(t *testing.T) {
	tests := []struct {
		os, lastSeen string
		want         activities.RepointMethod
	}{
		{"", "", activities.RepointNone},
		{"ubuntu-24.04", "2026-11-30T06:00:00Z", activities.RepointAgent},
		{"esxi_8.0u2", "", activities.RepointESXi},
		{"ESXi-7.0", "2026-11-30T06:00:00Z", activities.RepointESXi},
		{"centos-esxi-tools", "", activities.RepointNone},
	}
	for _, tt := range tests {
		t.Run(tt.os+"/"+tt.lastSeen, func(t *testing.T) {
			f := newFixture(t)
			f.east.Update(uuid, func(m *api.Machine) {
				m.OS = tt.os
				if tt.lastSeen != "" {
					m.Meta[api.MetaAgentLastSeen] = tt.lastSeen
				}
			})
			v, err := f.env.ExecuteActivity(a.ValidateMigration, activities.ValidateInput{Migration: migration, SourceRegion: "east", TargetRegion: "west", Machine: uuid})
			if err != nil {
				t.Fatal(err)
			}
			var res activities.ValidateResult
			if err := v.Get(&res); err != nil {
				t.Fatal(err)
			}
			if res.Repoint != tt.want {
				t.Errorf("Repoint = %q, want %q", res.Repoint, tt.want)
			}
		})
	}
}

// hostRegion is the region holding an ESXi machine: its record, its secrets and its ad-hoc
// jobs, which a simulated agent runs with /bin/sh on this host (the host sshd runs on). The
// embedded Region is nil: the ESXi activities use HostRegion calls only.
type hostRegion struct {
	activities.Region

	mu       sync.Mutex
	machine  api.Machine
	secrets  map[string]string
	given    []string // every secret value ever stored
	jobs     map[string]*api.Job
	logs     map[string]string
	scripts  []string
	agentOff bool // the agent never takes a job
}

func (h *hostRegion) GetMachine(_ context.Context, key string) (api.Machine, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if key != h.machine.Uuid {
		return api.Machine{}, &client.APIError{StatusCode: http.StatusNotFound, Message: "no machine " + key}
	}
	return h.machine, nil
}

func (h *hostRegion) GetSecret(_ context.Context, _, name string) (api.Secret, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.secrets[name]
	if !ok {
		return api.Secret{}, &client.APIError{StatusCode: http.StatusNotFound, Message: "no secret " + name}
	}
	return api.Secret{Name: name, Value: v}, nil
}

func (h *hostRegion) PutSecret(_ context.Context, _ string, s api.Secret) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.secrets[s.Name] = s.Value
	h.given = append(h.given, s.Value)
	return nil
}

func (h *hostRegion) SetMachineParam(_ context.Context, _, name string, value any) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.machine.Params[name] = value
	return nil
}

func (h *hostRegion) DeleteSecret(_ context.Context, _, name string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.secrets, name)
	return nil
}

func (h *hostRegion) RunAdhoc(_ context.Context, key string, req api.AdhocRequest) (api.Job, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	job := &api.Job{Uuid: fmt.Sprintf("job-%d", len(h.jobs)+1), Machine: key, State: api.JobCreated, Task: api.AdhocTaskPrefix + "x"}
	h.jobs[job.Uuid] = job
	h.scripts = append(h.scripts, req.Script)
	answer := *job
	if !h.agentOff {
		job.State = api.JobRunning // taken at once
		go h.run(job.Uuid, req.Script)
	}
	return answer, nil
}

// run is the simulated agent: output and errors go to one log, as the real agent sends them.
func (h *hostRegion) run(id, script string) {
	out, err := exec.Command("/bin/sh", "-c", script).CombinedOutput()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.logs[id] = string(out)
	h.jobs[id].State, h.jobs[id].ExitState = api.JobFinished, "complete"
	if err != nil {
		h.jobs[id].State, h.jobs[id].ExitState = api.JobFailed, "failed"
	}
}

func (h *hostRegion) GetJob(_ context.Context, key string) (api.Job, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	j, ok := h.jobs[key]
	if !ok {
		return api.Job{}, &client.APIError{StatusCode: http.StatusNotFound, Message: "no job " + key}
	}
	return *j, nil
}

func (h *hostRegion) JobLog(_ context.Context, key string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.logs[key], nil
}

func (h *hostRegion) DeleteJob(_ context.Context, key string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.jobs[key]; !ok {
		return &client.APIError{StatusCode: http.StatusNotFound, Message: "no job " + key}
	}
	delete(h.jobs, key)
	return nil
}

func (h *hostRegion) setAgentOff(off bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.agentOff = off
}

func (h *hostRegion) ranScripts() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.scripts)
}

// esxiHost is one ESXi host simulated on 127.0.0.1: a real sshd, a simulated SSH service,
// root's keys and an agent config in a temp dir, and the region holding its machine.
type esxiHost struct {
	t        *testing.T
	sshd     *sshdtest.Server
	svc      *sshdtest.Service
	region   *hostRegion
	operator ssh.Signer
	cfg      activities.ESXiConfig
	config   string // agent config path
	keys     []byte // root's authorized_keys as found
	env      *testsuite.TestActivityEnvironment
}

func newESXiHost(t *testing.T, serviceRunning bool) *esxiHost {
	t.Helper()
	dir := t.TempDir()
	h := &esxiHost{t: t, sshd: sshdtest.Start(t, dir), svc: sshdtest.NewService(t, dir, serviceRunning, serviceRunning), operator: sshdtest.NewSigner(t)}
	if err := os.Mkdir(filepath.Dir(h.sshd.KeysFile), 0o700); err != nil {
		t.Fatal(err)
	}
	h.keys = []byte("# root\n" + sshdtest.AuthorizedLine(h.operator, "operator") + "\n" + sshdtest.AuthorizedLine(sshdtest.NewSigner(t), "other")) // no final newline
	if err := os.WriteFile(h.sshd.KeysFile, h.keys, 0o600); err != nil {
		t.Fatal(err)
	}
	h.config = filepath.Join(dir, "agent.yaml")
	err := agent.WriteConfig(h.config, agent.Config{Endpoints: []string{"http://east.example:5240"}, Machine: uuid, Secret: "s3cret", PollWait: 30 * time.Second, JobTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	h.region = &hostRegion{
		machine: api.Machine{Uuid: uuid, Name: "esx1", OS: "esxi-8.0", Address: "127.0.0.1", Params: map[string]any{activities.ParamSSHHostKey: h.sshd.HostKey}},
		secrets: map[string]string{}, jobs: map[string]*api.Job{}, logs: map[string]string{},
	}
	c := h.svc.Command
	h.cfg = activities.ESXiConfig{
		Login: h.operator,
		Port:  sshPort(t, h.sshd.Addr),
		Paths: esxi.Paths{AuthorizedKeysFile: h.sshd.KeysFile, AgentConfig: h.config, BackupDir: filepath.Join(dir, "backup")},
		Commands: esxi.Commands{
			Running: c("running"), Enabled: c("enabled"), Start: c("start"), Stop: c("stop"), Enable: c("enable"), Disable: c("disable"),
		},
		AdhocPoll: 10 * time.Millisecond,
	}
	return h
}

func sshPort(t *testing.T, addr string) int {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// activities registers the ESXi activities of a worker configured with cfg.
func (h *esxiHost) activities() {
	regions, err := activities.NewRegions(map[string]activities.RegionConfig{"west": {URL: "https://west.example:5240"}},
		func(activities.RegionConfig) activities.Region { return h.region })
	if err != nil {
		h.t.Fatal(err)
	}
	var suite testsuite.WorkflowTestSuite
	h.env = suite.NewTestActivityEnvironment()
	h.env.RegisterActivity(&activities.Activities{Regions: regions, ESXi: h.cfg})
}

func (h *esxiHost) input(useAgent bool) activities.ESXiInput {
	return activities.ESXiInput{MachineRef: ref("west"), UseAgent: useAgent}
}

// login reports whether key logs in on the host's sshd.
func (h *esxiHost) login(key ssh.Signer) error {
	c, err := ssh.Dial("tcp", h.sshd.Addr, &ssh.ClientConfig{User: "root", Auth: []ssh.AuthMethod{ssh.PublicKeys(key)}, HostKeyCallback: ssh.InsecureIgnoreHostKey()})
	if err == nil {
		c.Close()
	}
	return err
}

func TestESXiActivitiesRepointAndRestore(t *testing.T) {
	tests := []struct {
		name     string
		useAgent bool
		running  bool // the SSH service as found
		tofu     bool // no recorded host key, TOFU allowed
	}{
		{"agent, SSH service stopped", true, false, false},
		{"operator key, SSH service running", false, true, false},
		{"operator key, trust on first use", false, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newESXiHost(t, tt.running)
			if tt.tofu {
				delete(h.region.machine.Params, activities.ParamSSHHostKey)
				h.cfg.AllowTOFU = true
			}
			h.activities()
			in := h.input(tt.useAgent)
			v, err := h.env.ExecuteActivity(a.ESXiPrepare, in)
			if err != nil {
				t.Fatal(err)
			}
			var p esxi.Prepared
			if err := v.Get(&p); err != nil {
				t.Fatal(err)
			}
			if p.HostKey != h.sshd.HostKey || strings.Contains(fmt.Sprint(p), "PRIVATE") {
				t.Errorf("Prepared = %+v", p)
			}
			if recorded := h.region.machine.Params[activities.ParamSSHHostKey]; recorded != h.sshd.HostKey {
				t.Errorf("host key param after Prepare = %v, want the host's key (recorded on first use, or kept)", recorded)
			}
			if running, _ := h.svc.State(); !running {
				t.Error("SSH service not running after Prepare")
			}
			in.HostKey = p.HostKey
			if _, err := h.env.ExecuteActivity(a.ESXiRewriteAgentConfig, activities.ESXiRewriteInput{ESXiInput: in, Endpoint: "https://west.example:5240"}); err != nil {
				t.Fatal(err)
			}
			if _, err := h.env.ExecuteActivity(a.ESXiCleanup, in); err != nil {
				t.Fatal(err)
			}

			cfg, err := agent.LoadConfig(h.config)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cfg.Endpoints, []string{"https://west.example:5240"}) || cfg.Secret != "s3cret" {
				t.Errorf("agent config after the repoint: %+v", cfg)
			}
			if keys, _ := os.ReadFile(h.sshd.KeysFile); string(keys) != string(h.keys) {
				t.Errorf("authorized_keys not restored:\n%s", keys)
			}
			if running, enabled := h.svc.State(); running != tt.running || enabled != tt.running {
				t.Errorf("SSH service running=%v enabled=%v, want %v as found", running, enabled, tt.running)
			}
			if len(h.region.secrets) != 0 || len(h.region.given) != 1 {
				t.Errorf("secrets left %v, keys made %d", h.region.secrets, len(h.region.given))
			}
			temp, err := ssh.ParsePrivateKey([]byte(h.region.given[0]))
			if err != nil {
				t.Fatal(err)
			}
			if err := h.login(temp); err == nil {
				t.Error("the temporary key still logs in")
			}
			if err := h.login(h.operator); err != nil {
				t.Errorf("the operator key no longer logs in: %v", err)
			}
			if ran := h.region.ranScripts(); tt.useAgent != (ran > 0) {
				t.Errorf("the agent ran %d scripts, use agent %v", ran, tt.useAgent)
			}
		})
	}
}

func TestESXiActivitiesRefuse(t *testing.T) {
	tests := []struct {
		name     string
		change   func(h *esxiHost)
		useAgent bool
		wantType string
		wantMsg  string
	}{
		{"wrong recorded host key", func(h *esxiHost) {
			h.region.machine.Params[activities.ParamSSHHostKey] = sshdtest.AuthorizedLine(sshdtest.NewSigner(h.t), "impostor")
		}, false, activities.ErrHostKeyRefused, "does not match"},
		{"unknown host key without TOFU", func(h *esxiHost) {
			delete(h.region.machine.Params, activities.ParamSSHHostKey)
		}, false, activities.ErrHostKeyRefused, "trust on first use not allowed"},
		{"no address", func(h *esxiHost) { h.region.machine.Address = "" }, false, activities.ErrHostUnusable, "has no Address"},
		{"no agent and no login key", func(h *esxiHost) { h.cfg.Login = nil }, false, activities.ErrHostUnusable, "no ESXi login key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newESXiHost(t, true)
			tt.change(h)
			h.activities()
			_, err := h.env.ExecuteActivity(a.ESXiPrepare, h.input(tt.useAgent))
			if !hasType(err, tt.wantType) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("got %v, want %s containing %q", err, tt.wantType, tt.wantMsg)
			}
			if keys, _ := os.ReadFile(h.sshd.KeysFile); string(keys) != string(h.keys) || len(h.region.given) != 0 {
				t.Error("a refused host was changed")
			}
		})
	}
}

// A failing host-side script fails the step with the end of its job log.
func TestESXiAgentScriptFailureReportsLog(t *testing.T) {
	h := newESXiHost(t, false)
	h.cfg.Commands.Start = "echo 'vim-cmd: service busy' >&2; exit 3"
	h.activities()
	_, err := h.env.ExecuteActivity(a.ESXiPrepare, h.input(true))
	if err == nil || !strings.Contains(err.Error(), "vim-cmd: service busy") || !strings.Contains(err.Error(), "failed") {
		t.Fatalf("got %v, want the job's failure with its log", err)
	}
	if _, err := h.env.ExecuteActivity(a.ESXiCleanup, h.input(true)); err != nil {
		t.Fatal(err)
	}
	if keys, _ := os.ReadFile(h.sshd.KeysFile); string(keys) != string(h.keys) {
		t.Errorf("authorized_keys not restored:\n%s", keys)
	}
}

// While the agent does not take the job, the step waits; a cancel ends the wait.
func TestESXiAgentAwayStopsOnCancel(t *testing.T) {
	h := newESXiHost(t, false)
	h.region.setAgentOff(true)
	h.activities()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	h.env.SetWorkerOptions(worker.Options{BackgroundActivityContext: ctx})
	_, err := h.env.ExecuteActivity(a.ESXiPrepare, h.input(true))
	if err == nil || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("got %v, want the wait to end with the context", err)
	}
	if h.region.ranScripts() != 1 {
		t.Errorf("%d jobs were asked for, want 1", h.region.ranScripts())
	}
}

// An agent that does not take the job in time fails the step for good, and the job is
// deleted so that it does not run later.
func TestESXiAgentAwayFailsAndDeletesJob(t *testing.T) {
	h := newESXiHost(t, false)
	h.region.setAgentOff(true)
	h.cfg.AdhocTake = 100 * time.Millisecond
	h.activities()
	_, err := h.env.ExecuteActivity(a.ESXiPrepare, h.input(true))
	if !hasType(err, activities.ErrAgentAway) {
		t.Fatalf("got %v, want %s", err, activities.ErrAgentAway)
	}
	if len(h.region.jobs) != 0 {
		t.Errorf("jobs left: %v", h.region.jobs)
	}
	if keys, _ := os.ReadFile(h.sshd.KeysFile); string(keys) != string(h.keys) || len(h.region.given) != 0 {
		t.Error("the host was changed")
	}
}

// When the agent that prepared the host is gone by Cleanup, the temporary key logs in to
// restore the host: it never outlives the migration.
func TestESXiCleanupWithoutAgentUsesTemporaryKey(t *testing.T) {
	h := newESXiHost(t, false)
	h.cfg.Login = nil
	h.cfg.AdhocTake = 100 * time.Millisecond
	h.activities()
	if _, err := h.env.ExecuteActivity(a.ESXiPrepare, h.input(true)); err != nil {
		t.Fatal(err)
	}
	h.region.setAgentOff(true)
	if _, err := h.env.ExecuteActivity(a.ESXiCleanup, h.input(true)); err != nil {
		t.Fatal(err)
	}
	if keys, _ := os.ReadFile(h.sshd.KeysFile); string(keys) != string(h.keys) {
		t.Errorf("authorized_keys not restored:\n%s", keys)
	}
	if running, enabled := h.svc.State(); running || enabled {
		t.Errorf("SSH service running=%v enabled=%v, want stopped and disabled as found", running, enabled)
	}
	if len(h.region.secrets) != 0 {
		t.Error("temporary key left in the secrets")
	}
	temp, err := ssh.ParsePrivateKey([]byte(h.region.given[0]))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.login(temp); err == nil {
		t.Error("the temporary key still logs in")
	}
}

// With the agent gone before Prepare changed anything, Cleanup has nothing to undo.
func TestESXiCleanupAgentAwayNothingPrepared(t *testing.T) {
	h := newESXiHost(t, false)
	h.cfg.Login = nil
	h.cfg.AdhocTake = 100 * time.Millisecond
	h.region.setAgentOff(true)
	h.activities()
	if _, err := h.env.ExecuteActivity(a.ESXiCleanup, h.input(true)); err != nil {
		t.Fatal(err)
	}
	if keys, _ := os.ReadFile(h.sshd.KeysFile); string(keys) != string(h.keys) {
		t.Errorf("authorized_keys changed:\n%s", keys)
	}
}
