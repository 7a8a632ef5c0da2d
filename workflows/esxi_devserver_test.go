package workflows_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/activities/esxi"
	"github.com/ironflow/ironflow/activities/regiontest"
	"github.com/ironflow/ironflow/agent"
	"github.com/ironflow/ironflow/dev/sshdtest"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
	"github.com/ironflow/ironflow/workers"
	"github.com/ironflow/ironflow/workflows"
)

// secretRegion adds machine secrets to a fake region; it has no agents to run ad-hoc jobs.
type secretRegion struct {
	*regiontest.Region

	mu      sync.Mutex
	secrets map[string]string
}

var errNoAgents = errors.New("this fake region has no agents")

func (r *secretRegion) GetSecret(_ context.Context, _, name string) (api.Secret, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.secrets[name]
	if !ok {
		return api.Secret{}, &client.APIError{StatusCode: http.StatusNotFound, Message: "no secret " + name}
	}
	return api.Secret{Name: name, Value: v}, nil
}

func (r *secretRegion) PutSecret(_ context.Context, _ string, s api.Secret) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secrets[s.Name] = s.Value
	return nil
}

func (r *secretRegion) DeleteSecret(_ context.Context, _, name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.secrets, name)
	return nil
}

func (r *secretRegion) RunAdhoc(context.Context, string, api.AdhocRequest) (api.Job, error) {
	return api.Job{}, errNoAgents
}
func (r *secretRegion) JobLog(context.Context, string) (string, error) { return "", errNoAgents }
func (r *secretRegion) DeleteJob(context.Context, string) error        { return errNoAgents }

// TestMigrateMachineESXiOnDevServer migrates birdy as an ESXi host (no agent, the worker's
// operator key, a real sshd on 127.0.0.1) on a real Temporal server. With -record it writes
// the history for TestReplayRecordedHistories, so the ESXi branch is guarded too.
func TestMigrateMachineESXiOnDevServer(t *testing.T) {
	c := devServer(t)
	dir := t.TempDir()
	sshd := sshdtest.Start(t, dir)
	svc := sshdtest.NewService(t, dir, true, true)
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	operator, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Dir(sshd.KeysFile), 0o700); err != nil {
		t.Fatal(err)
	}
	keys := ssh.MarshalAuthorizedKey(operator.PublicKey())
	if err := os.WriteFile(sshd.KeysFile, keys, 0o600); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "agent.yaml")
	if err := agent.WriteConfig(config, agent.Config{Endpoints: []string{"https://east.example:5240"}, Machine: birdyUUID, Secret: "h5kYqfCu6ehiAVz0", PollWait: time.Second, JobTimeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(sshd.Addr)
	sshPort, _ := strconv.Atoi(port)

	journal := &regiontest.Journal{}
	regions := map[string]*secretRegion{
		"https://east.example:5240": {Region: regiontest.New("east", "https://east.example:5240", journal), secrets: map[string]string{}},
		"https://west.example:5240": {Region: regiontest.New("west", "https://west.example:5240", journal), secrets: map[string]string{}},
	}
	east, west := regions["https://east.example:5240"], regions["https://west.example:5240"]
	m := birdy()
	m.OS, m.Address, m.Params = "esxi-8.0u2", "127.0.0.1", map[string]any{activities.ParamSSHHostKey: sshd.HostKey}
	east.Put(m)
	east.PutJobs(birdyJobs(api.JobFinished)...)
	resolver, err := activities.NewRegions(map[string]activities.RegionConfig{
		"east": {URL: "https://east.example:5240"}, "west": {URL: "https://west.example:5240"},
	}, func(rc activities.RegionConfig) activities.Region { return regions[rc.URL] })
	if err != nil {
		t.Fatal(err)
	}
	cmd := svc.Command
	w := workers.NewMigrationWorker(c, &activities.Activities{Regions: resolver, ESXi: activities.ESXiConfig{
		Login: operator, Port: sshPort,
		Paths:    esxi.Paths{AuthorizedKeysFile: sshd.KeysFile, AgentConfig: config, BackupDir: filepath.Join(dir, "backup")},
		Commands: esxi.Commands{Running: cmd("running"), Enabled: cmd("enabled"), Start: cmd("start"), Stop: cmd("stop"), Enable: cmd("enable"), Disable: cmd("disable")},
	}})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, workflows.MigrateMachineStartOptions(birdyUUID), workflows.MigrateMachine, input())
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.MigrateMachineResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if !res.AgentRepointed {
		t.Errorf("result %+v", res)
	}
	cfg, err := agent.LoadConfig(config)
	if err != nil || !slices.Equal(cfg.Endpoints, []string{"https://west.example:5240"}) {
		t.Errorf("agent config %+v, %v", cfg, err)
	}
	if got, _ := os.ReadFile(sshd.KeysFile); string(got) != string(keys) {
		t.Errorf("authorized_keys not restored:\n%s", got)
	}
	if running, enabled := svc.State(); !running || !enabled {
		t.Errorf("SSH service running=%v enabled=%v, want both as found", running, enabled)
	}
	if len(west.secrets) != 0 {
		t.Errorf("temporary key left: %v", west.secrets)
	}
	if *record {
		writeHistory(ctx, t, c, run, filepath.Join("testdata", "migrate_machine_esxi_history.json"))
	}
}
