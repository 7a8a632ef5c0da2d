package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/region/api"
)

const (
	testMachine = "5b1a4a38-3c2e-4b8e-9a55-0d5c7a1f2e01"
	testSecret  = "s3cret"
	waitLimit   = 15 * time.Second // only bounds a hung test; nothing is asserted on time
)

// fakeRegion implements the agent API contract of region/api/agent.go for one machine.
type fakeRegion struct {
	srv        *httptest.Server
	redirectTo string // when set, every call is answered 307 as for a migrated stub
	jobs       chan api.AgentJob
	checkedIn  chan api.AgentCheckin
	exited     chan string
	onLog      func(chunk string)

	mu    sync.Mutex
	logs  map[string][]string
	exits map[string]api.AgentJobExit
	hits  int
}

func newFakeRegion(t *testing.T, redirectTo string) *fakeRegion {
	f := &fakeRegion{
		redirectTo: redirectTo,
		jobs:       make(chan api.AgentJob, 4),
		checkedIn:  make(chan api.AgentCheckin, 16),
		exited:     make(chan string, 4),
		logs:       map[string][]string{},
		exits:      map[string]api.AgentJobExit{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/agent/{uuid}/checkin", f.checkin)
	mux.HandleFunc("GET /api/v1/agent/{uuid}/next-job", f.nextJob)
	mux.HandleFunc("PUT /api/v1/agent/{uuid}/jobs/{job}/log", f.log)
	mux.HandleFunc("POST /api/v1/agent/{uuid}/jobs/{job}/exit", f.exit)
	f.srv = httptest.NewServer(f.auth(mux))
	t.Cleanup(f.srv.Close)
	return f
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(api.Error{Error: msg, Code: code})
}

func (f *fakeRegion) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.hits++
		f.mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer machine:"+testMachine+":"+testSecret ||
			!strings.HasPrefix(r.URL.Path, "/api/v1/agent/"+testMachine+"/") {
			writeError(w, http.StatusUnauthorized, "bad machine credentials")
			return
		}
		if f.redirectTo != "" {
			w.Header().Set("Location", f.redirectTo+r.URL.RequestURI())
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTemporaryRedirect)
			json.NewEncoder(w).Encode(api.Redirect{Endpoint: f.redirectTo, Machine: testMachine})
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (f *fakeRegion) checkin(w http.ResponseWriter, r *http.Request) {
	var in api.AgentCheckin
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	f.checkedIn <- in
	json.NewEncoder(w).Encode(api.AgentConfig{Machine: testMachine, Endpoints: []string{f.srv.URL}, PollWait: "1s"})
}

func (f *fakeRegion) nextJob(w http.ResponseWriter, r *http.Request) {
	wait, err := time.ParseDuration(r.URL.Query().Get("wait"))
	if err != nil || wait > MaxPollWait {
		writeError(w, http.StatusBadRequest, "bad wait")
		return
	}
	select {
	case job := <-f.jobs:
		json.NewEncoder(w).Encode(job)
	case <-time.After(wait):
		w.WriteHeader(http.StatusNoContent)
	case <-r.Context().Done():
	}
}

func (f *fakeRegion) log(w http.ResponseWriter, r *http.Request) {
	buf := new(bytes.Buffer)
	if _, err := buf.ReadFrom(r.Body); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	f.mu.Lock()
	job := r.PathValue("job")
	f.logs[job] = append(f.logs[job], buf.String())
	f.mu.Unlock()
	if f.onLog != nil {
		f.onLog(buf.String())
	}
	w.WriteHeader(http.StatusNoContent)
}

func (f *fakeRegion) exit(w http.ResponseWriter, r *http.Request) {
	var in api.AgentJobExit
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	job := r.PathValue("job")
	f.mu.Lock()
	f.exits[job] = in
	f.mu.Unlock()
	f.exited <- job
	json.NewEncoder(w).Encode(api.Job{Uuid: job, Machine: testMachine, State: api.JobFinished, ExitState: in.ExitState})
}

func (f *fakeRegion) jobLog(job string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.logs[job])
}

func (f *fakeRegion) exitOf(job string) api.AgentJobExit {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.exits[job]
}

func (f *fakeRegion) waitExit(t *testing.T) string {
	t.Helper()
	select {
	case job := <-f.exited:
		return job
	case <-time.After(waitLimit):
		t.Fatal("no job exit reported")
		return ""
	}
}

func (f *fakeRegion) waitCheckin(t *testing.T) api.AgentCheckin {
	t.Helper()
	select {
	case c := <-f.checkedIn:
		return c
	case <-time.After(waitLimit):
		t.Fatal("no check-in")
		return api.AgentCheckin{}
	}
}

func writeTestConfig(t *testing.T, endpoints ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agent.yaml")
	cfg := Config{Endpoints: endpoints, Machine: testMachine, Secret: testSecret, PollWait: time.Second, JobTimeout: time.Minute}
	if err := WriteConfig(path, cfg); err != nil {
		t.Fatal(err)
	}
	return path
}

// startAgent serves the agent until the test ends.
func startAgent(t *testing.T, path string) *Agent {
	t.Helper()
	a, err := New(path, Options{
		Version:     "test",
		Logger:      slog.New(slog.NewTextHandler(testWriter{t}, nil)),
		Backoff:     Backoff{Min: 10 * time.Millisecond, Max: 200 * time.Millisecond},
		LogInterval: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- a.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return a
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func newJob(id, script string, timeout time.Duration) api.AgentJob {
	return api.AgentJob{Job: api.Job{Uuid: id, Machine: testMachine, State: api.JobRunning}, Script: script, Timeout: timeout}
}

func processGone(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	// An orphan killed but not yet reaped by init is a zombie: it no longer runs.
	return err != nil || strings.Contains(string(stat), ") Z ")
}

func TestJobRuns(t *testing.T) {
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	pidFile := filepath.Join(dir, "bg.pid")
	tests := []struct {
		name      string
		script    string
		timeout   time.Duration
		onLog     func(chunk string)
		wantState string
		wantCode  int
		wantLog   string // whole log; "" = only check that it starts with wantStart
		minChunks int
		check     func(t *testing.T)
	}{
		{
			name:      "complete",
			script:    "echo hello; echo world >&2",
			wantState: ExitComplete, wantCode: 0, wantLog: "hello\nworld\n", minChunks: 1,
		},
		{
			// The script only goes on once the region has received its first line: the log
			// must be streamed while the job runs, not sent at the end.
			name:   "failed, streamed while running",
			script: fmt.Sprintf("echo first; while [ ! -e %s ]; do sleep 0.02; done; echo second >&2; exit 3", gate),
			onLog: func(chunk string) {
				if strings.Contains(chunk, "first") {
					os.WriteFile(gate, nil, 0o644)
				}
			},
			wantState: ExitFailed, wantCode: 3, wantLog: "first\nsecond\n", minChunks: 2,
		},
		{
			name:      "timeout kills the process group",
			script:    fmt.Sprintf("sleep 60 & echo $! > %s; echo started; sleep 60", pidFile),
			timeout:   300 * time.Millisecond,
			wantState: ExitTimeout, wantCode: 128 + int(syscall.SIGKILL), minChunks: 1,
			wantLog: "started\n\nironflow agent: job timed out after 300ms, killed\n",
			check: func(t *testing.T) {
				data, err := os.ReadFile(pidFile)
				if err != nil {
					t.Fatal(err)
				}
				pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
				if err != nil {
					t.Fatal(err)
				}
				testutil.Eventually(t, waitLimit, fmt.Sprintf("background child %d of the timed-out job to end", pid), func() bool { return processGone(pid) })
			},
		},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			region := newFakeRegion(t, "")
			region.onLog = tc.onLog
			startAgent(t, writeTestConfig(t, region.srv.URL))
			if c := region.waitCheckin(t); c.Endpoint != region.srv.URL || c.Version != "test" {
				t.Errorf("check-in = %+v", c)
			}
			id := fmt.Sprintf("00000000-0000-0000-0000-00000000000%d", i+1)
			region.jobs <- newJob(id, tc.script, tc.timeout)
			if got := region.waitExit(t); got != id {
				t.Fatalf("exit reported for job %s, want %s", got, id)
			}
			if got, want := region.exitOf(id), (api.AgentJobExit{ExitCode: tc.wantCode, ExitState: tc.wantState}); got != want {
				t.Errorf("exit = %+v, want %+v", got, want)
			}
			chunks := region.jobLog(id)
			if got := strings.Join(chunks, ""); got != tc.wantLog {
				t.Errorf("log = %q, want %q", got, tc.wantLog)
			}
			if len(chunks) < tc.minChunks {
				t.Errorf("log came in %d chunks, want at least %d: %q", len(chunks), tc.minChunks, chunks)
			}
			region.waitCheckin(t) // the agent checks in again after every job
			if tc.check != nil {
				tc.check(t)
			}
		})
	}
}

func TestEndpointFailover(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close() // its port now refuses connections
	region := newFakeRegion(t, "")
	startAgent(t, writeTestConfig(t, dead.URL, region.srv.URL))

	if c := region.waitCheckin(t); c.Endpoint != region.srv.URL {
		t.Errorf("checked in with endpoint %q, want %q", c.Endpoint, region.srv.URL)
	}
	region.jobs <- newJob("11111111-1111-1111-1111-111111111111", "echo ok", 0)
	region.waitExit(t)
	if got := region.exitOf("11111111-1111-1111-1111-111111111111"); got.ExitState != ExitComplete {
		t.Errorf("exit = %+v", got)
	}
}

func TestRedirectRewritesConfig(t *testing.T) {
	dest := newFakeRegion(t, "")
	source := newFakeRegion(t, dest.srv.URL)
	other := newFakeRegion(t, "")
	path := writeTestConfig(t, source.srv.URL, other.srv.URL)
	a := startAgent(t, path)

	if c := dest.waitCheckin(t); c.Endpoint != dest.srv.URL {
		t.Errorf("checked in at the destination with endpoint %q", c.Endpoint)
	}
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Endpoints, []string{dest.srv.URL}) {
		t.Errorf("config endpoints after redirect = %v, want only %s", cfg.Endpoints, dest.srv.URL)
	}
	if cfg.Machine != testMachine || cfg.Secret != testSecret || cfg.JobTimeout != time.Minute {
		t.Errorf("redirect changed more than the endpoints: %+v", cfg)
	}
	if got := a.Config().Endpoints; !slices.Equal(got, []string{dest.srv.URL}) {
		t.Errorf("agent endpoints in memory = %v", got)
	}

	const id = "22222222-2222-2222-2222-222222222222"
	dest.jobs <- newJob(id, "echo moved", 0)
	if got := dest.waitExit(t); got != id {
		t.Fatalf("destination got exit of %s", got)
	}
	if got := strings.Join(dest.jobLog(id), ""); got != "moved\n" {
		t.Errorf("destination log = %q", got)
	}
	other.mu.Lock()
	defer other.mu.Unlock()
	if other.hits != 0 {
		t.Errorf("the dropped endpoint got %d calls", other.hits)
	}
}

func TestCorruptConfigRefused(t *testing.T) {
	valid := "endpoints: [http://127.0.0.1:5240]\nmachine: " + testMachine + "\nsecret: x\n"
	tests := []struct {
		name    string
		content string
		wantErr string
	}{
		{"empty", "", "empty config"},
		{"garbage", "\x00\x01{{{:::", "not a valid agent config"},
		{"truncated", "endpoints: [http://127.0.0.1:5240\nmachine: ", "not a valid agent config"},
		{"unknown key", valid + "endpiont: http://x\n", "not a valid agent config"},
		{"no endpoints", "machine: " + testMachine + "\nsecret: x\n", "at least one endpoint"},
		{"endpoint without scheme", strings.Replace(valid, "http://127.0.0.1:5240", "127.0.0.1:5240", 1), "endpoints:"},
		{"ftp endpoint", strings.Replace(valid, "http://", "ftp://", 1), "not an absolute http(s) URL"},
		{"bad machine", strings.Replace(valid, testMachine, "birdy", 1), "not a UUID"},
		{"no secret", strings.Replace(valid, "secret: x\n", "", 1), "secret: required"},
		{"bad pollWait", valid + "pollWait: soon\n", "pollWait"},
		{"pollWait too long", valid + "pollWait: 2m\n", "pollWait 2m0s"},
		{"negative jobTimeout", valid + "jobTimeout: -1s\n", "jobTimeout -1s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "agent.yaml")
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := New(path, Options{})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), path) {
				t.Fatalf("New = %v, want an error naming %s and %q", err, path, tc.wantErr)
			}
			if data, _ := os.ReadFile(path); string(data) != tc.content {
				t.Error("refusing the config changed the file")
			}
		})
	}
	if _, err := New(filepath.Join(t.TempDir(), "missing.yaml"), Options{}); err == nil {
		t.Error("a missing config was accepted")
	}
}

func TestWriteConfigRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "agent.yaml")
	want := Config{Endpoints: []string{"https://r1:5240", "http://rack:5248"}, Machine: testMachine, Secret: "p:w", PollWait: 45 * time.Second, JobTimeout: 2 * time.Hour}
	for range 2 { // the second write replaces the first
		if err := WriteConfig(path, want); err != nil {
			t.Fatal(err)
		}
	}
	got, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Endpoints, want.Endpoints) || got.Machine != want.Machine || got.Secret != want.Secret ||
		got.PollWait != want.PollWait || got.JobTimeout != want.JobTimeout {
		t.Errorf("round trip = %+v, want %+v", got, want)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("config mode %v, want 0600 (it holds the machine secret)", st.Mode().Perm())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("temp files left beside the config: %v", entries)
	}

	bad := want
	bad.Endpoints = nil
	if err := WriteConfig(path, bad); err == nil {
		t.Error("an invalid config was written")
	}
	if again, _ := LoadConfig(path); again.Secret != want.Secret {
		t.Error("a refused write changed the file")
	}
}
