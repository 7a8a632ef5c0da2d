package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ironflow/ironflow/dev"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/workflows"
)

// TestWorkerKilledMidMigration kills the worker process with SIGKILL while a migration waits
// for the machine's agent at the destination (after quiesce, copy and finalize), starts a new
// worker process, and checks that the migration finishes with the invariants intact.
func TestWorkerKilledMidMigration(t *testing.T) {
	s := startStack(t, dev.StackOptions{Seed: true})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	a, b := regionClient(s, "region-a"), regionClient(s, "region-b")

	// birdy has an agent: the workflow waits for it to check in at region-b.
	if _, err := a.Machines().Patch(ctx, "Name:birdy", json.RawMessage(`{"Meta": {"agent-last-seen": "2026-11-30T05:00:00Z"}}`)); err != nil {
		t.Fatal(err)
	}
	birdy := getMachine(ctx, t, a, "Name:birdy")
	bin := buildIronflow(t)
	regionsFile, err := s.WriteRegionsFile()
	if err != nil {
		t.Fatal(err)
	}
	first := startWorker(t, bin, s, regionsFile)

	run := startMigration(ctx, t, s, workflows.MigrateMachineInput{SourceRegion: "region-a", TargetRegion: "region-b", Machine: "Name:birdy"})
	waitForPhase(ctx, t, s, run.GetID(), workflows.PhaseRepointing)

	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	startWorker(t, bin, s, regionsFile)

	agentCheckIn(ctx, t, s.Regions["region-b"].URL, birdy)
	var res workflows.MigrateMachineResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatalf("migration after a worker crash: %v", err)
	}
	if !res.AgentRepointed {
		t.Errorf("result %+v: agent not repointed", res)
	}
	assertActiveOnExactlyOne(ctx, t, s, birdy.Uuid, "region-b")
	if jobs := listJobs(ctx, t, b, birdy.Uuid); len(jobs) != 2 {
		t.Errorf("region-b has %d of birdy's jobs, want 2", len(jobs))
	}
}

var (
	buildOnce sync.Once
	binDir    string
	binErr    error
)

// buildIronflow builds the ironflow binary, once per test binary, for tests that run it as a
// process (TestMain removes it).
func buildIronflow(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "ironflow-bin-"); binErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", filepath.Join(binDir, "ironflow"), "../cmd/ironflow").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("build ironflow: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return filepath.Join(binDir, "ironflow")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// startWorker runs `ironflow worker` against the stack; the test ends it by PID.
func startWorker(t *testing.T, bin string, s *dev.Stack, regionsFile string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, "worker", "--temporal-address", s.Temporal.Address, "--regions-file", regionsFile, "--payload-keys", s.PayloadKeys, "--make-current")
	logFile, err := os.Create(filepath.Join(t.TempDir(), "worker.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		}
		logFile.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logFile.Name()); err == nil {
				t.Logf("worker %d log:\n%s", cmd.Process.Pid, b)
			}
		}
	})
	return cmd
}

// waitForPhase polls the workflow's progress query until it reports phase.
func waitForPhase(ctx context.Context, t *testing.T, s *dev.Stack, workflowID, phase string) {
	t.Helper()
	testutil.EventuallyOK(t, 2*time.Minute, func() string {
		v, err := s.Client.QueryWorkflow(ctx, workflowID, "", workflows.ProgressQuery)
		var p workflows.Progress
		if err == nil {
			err = v.Get(&p)
		}
		if err == nil && p.Phase == phase {
			return ""
		}
		return fmt.Sprintf("workflow %s never reached phase %s (last %q, %v)", workflowID, phase, p.Phase, err)
	})
}

// agentCheckIn does what a repointed agent does first at its new region.
func agentCheckIn(ctx context.Context, t *testing.T, regionURL string, m api.Machine) {
	t.Helper()
	body, _ := json.Marshal(api.AgentCheckin{Version: "test", Hostname: m.Name, Endpoint: regionURL})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("%s/api/v1/agent/%s/checkin", regionURL, m.Uuid), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer machine:"+m.Uuid+":"+m.Secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("agent check-in at %s: HTTP %d", regionURL, resp.StatusCode)
	}
}
