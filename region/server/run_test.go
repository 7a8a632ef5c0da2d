package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironflow/ironflow/dev/pgtest"
	"github.com/ironflow/ironflow/dev/postgres"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/server"
	"github.com/ironflow/ironflow/region/store"
)

// TestDatabaseOutage stops the PostgreSQL cluster under a running server: /healthz and API
// calls answer 503, and both recover once the cluster is back on the same port and data dir.
func TestDatabaseOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := startCluster(t, 0)
	st, err := store.Open(ctx, pg.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	admin, _, err := st.BootstrapAdmin(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, st: st, base: startServer(t, st, "outage"), tokens: map[string]string{api.RoleAdmin: admin}}
	e.create(api.KindPools, map[string]any{"Name": "before"})

	if err := pg.Halt(); err != nil {
		t.Fatal(err)
	}
	e.do("", http.MethodGet, "/healthz", nil).apiError(t, http.StatusServiceUnavailable)
	e.do(api.RoleAdmin, http.MethodGet, "/api/v1/pools/before", nil).apiError(t, http.StatusServiceUnavailable)
	e.do(api.RoleAdmin, http.MethodPost, "/api/v1/pools", map[string]any{"Name": "during"}).apiError(t, http.StatusServiceUnavailable)
	e.do("", http.MethodGet, "/api/v1/info", nil).apiError(t, http.StatusServiceUnavailable)

	// Same data dir and port; the Halt that startCluster registered stops it again.
	if _, err := postgres.StartOnPort(ctx, pg.DataDir, pg.Port); err != nil {
		t.Fatal(err)
	}
	eventually(t, "healthz to recover", func() bool { return e.do("", http.MethodGet, "/healthz", nil).code == http.StatusOK })
	e.mustDo(api.RoleAdmin, http.MethodGet, "/api/v1/pools/before", nil, http.StatusOK)
	e.create(api.KindPools, map[string]any{"Name": "after"})
	e.do(api.RoleAdmin, http.MethodGet, "/api/v1/pools/during", nil).apiError(t, http.StatusNotFound)
}

// The Run tests are not parallel: they capture os.Stdout (to check that Run never writes
// there), which parallel tests only use once every sequential test is done.

// TestRunWaitsForDatabaseAndRestarts starts Run before PostgreSQL is up (it retries and logs),
// reads the minted admin token from Config.AdminTokenOut, then restarts Run on the same
// database with a configured token: data and the first token survive, nothing more is
// printed, nothing at all goes to os.Stdout and the configured token is never logged.
func TestRunWaitsForDatabaseAndRestarts(t *testing.T) {
	// initdb takes seconds; do it first so the wait below is only for the server to start.
	pg := startCluster(t, 0)
	if err := pg.Halt(); err != nil {
		t.Fatal(err)
	}
	port := pg.Port
	stdout := captureStdout(t)
	tokenOut := &syncBuffer{}
	listen := testutil.FreeAddr(t)
	base := "http://" + listen
	cfg := server.Config{
		DatabaseURL:   fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port),
		Listen:        listen,
		Name:          "run-region",
		PublicURL:     base,
		Version:       "v-test",
		AdminTokenOut: tokenOut,
	}

	logs := &syncBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	stop := startRun(t, cfg)
	eventually(t, "a logged retry", func() bool { return strings.Count(logs.String(), "database not reachable yet") >= 2 })
	if _, err := postgres.StartOnPort(context.Background(), pg.DataDir, port); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the region to serve", func() bool { return healthy(base) })

	var m []string
	eventually(t, "the admin token printed", func() bool {
		m = regexp.MustCompile(`(?m)^admin token: (\S+)$`).FindStringSubmatch(tokenOut.String())
		return m != nil
	})
	token := m[1]
	if strings.Contains(logs.String(), token) {
		t.Error("the minted admin token was logged")
	}
	if !strings.Contains(logs.String(), "minted the first admin token") {
		t.Errorf("minting not logged:\n%s", logs)
	}
	created := doRequest(t, token, http.MethodPost, base+"/api/v1/machines", map[string]any{"Name": "survivor"})
	if created.code != http.StatusCreated {
		t.Fatalf("create: %d %s", created.code, created.body)
	}
	info := doRequest(t, "", http.MethodGet, base+"/api/v1/info", nil).json(t)
	stop()

	const configured = "configured-admin-token-for-the-restart-test"
	cfg.AdminToken = configured
	logs = &syncBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	stop = startRun(t, cfg)
	eventually(t, "the region to serve again", func() bool { return healthy(base) })
	for _, tok := range []string{token, configured} {
		r := doRequest(t, tok, http.MethodGet, base+"/api/v1/machines/Name:survivor", nil)
		if r.code != http.StatusOK || r.json(t)["Uuid"] != created.json(t)["Uuid"] {
			t.Errorf("after restart: %d %s", r.code, r.body)
		}
	}
	if again := doRequest(t, "", http.MethodGet, base+"/api/v1/info", nil).json(t); again["Uuid"] != info["Uuid"] {
		t.Errorf("region UUID changed across restart: %v then %v", info["Uuid"], again["Uuid"])
	}
	stop()
	if out := tokenOut.String(); strings.Count(out, "admin token:") != 1 {
		t.Errorf("AdminTokenOut got %q, want one admin token line", out)
	}
	if out := stdout.Close(); out != "" {
		t.Errorf("stdout = %q, want nothing: Run prints only to AdminTokenOut", out)
	}
	if strings.Contains(logs.String(), configured) {
		t.Error("the configured admin token was logged")
	}
}

// TestRunConfiguredAdminToken bootstraps a fresh database with a configured token: it works,
// is not printed and not logged.
func TestRunConfiguredAdminToken(t *testing.T) {
	stdout := captureStdout(t)
	tokenOut := &syncBuffer{}
	listen := testutil.FreeAddr(t)
	logs := &syncBuffer{}
	const configured = "configured-admin-token-for-a-fresh-database"
	stop := startRun(t, server.Config{
		DatabaseURL:   pgtest.NewDatabase(t),
		Listen:        listen,
		AdminToken:    configured,
		AdminTokenOut: tokenOut,
		Logger:        slog.New(slog.NewTextHandler(logs, nil)),
	})
	base := "http://" + listen
	eventually(t, "the region to serve", func() bool { return healthy(base) })
	if r := doRequest(t, configured, http.MethodGet, base+"/api/v1/users/admin", nil); r.code != http.StatusOK {
		t.Errorf("configured token: %d %s", r.code, r.body)
	}
	if info := doRequest(t, "", http.MethodGet, base+"/api/v1/info", nil).json(t); info["URL"] != base {
		t.Errorf("Info.URL = %v, want the listen address %s when no public URL is configured", info["URL"], base)
	}
	stop()
	if out := stdout.Close(); out != "" {
		t.Errorf("stdout = %q, want nothing", out)
	}
	if out := tokenOut.String(); out != "" {
		t.Errorf("AdminTokenOut got %q, want nothing", out)
	}
	if strings.Contains(logs.String(), configured) {
		t.Error("the configured admin token was logged")
	}
	if !strings.Contains(logs.String(), "installed the admin token from the configuration") {
		t.Errorf("installing the token was not logged:\n%s", logs)
	}
}

func TestRunGivesUpWhenContextEnds(t *testing.T) {
	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- server.Run(ctx, server.Config{
			DatabaseURL:   fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", testutil.FreePort(t)),
			Listen:        "127.0.0.1:0",
			AdminTokenOut: io.Discard,
			Logger:        slog.New(slog.NewTextHandler(logs, nil)),
		})
	}()
	eventually(t, "a logged retry", func() bool { return strings.Contains(logs.String(), "database not reachable yet") })
	cancel()
	if err := <-done; err == nil || !strings.Contains(err.Error(), "gave up") {
		t.Errorf("Run = %v, want it to give up", err)
	}
}

// TestRunNeedsWayToShowMintedToken: with no admin token configured and nowhere to print a
// minted one, Run refuses before it touches the database.
func TestRunNeedsWayToShowMintedToken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a Run that waited for the database would give up
	defer cancel()
	err := server.Run(ctx, server.Config{
		DatabaseURL: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", testutil.FreePort(t)),
		Listen:      "127.0.0.1:0",
	})
	if err == nil || !strings.Contains(err.Error(), "no admin token and no way to show a minted one") {
		t.Fatalf("Run = %v, want a refusal naming the missing admin token output", err)
	}
}

// startRun runs Run until the returned stop is called (or the test ends); stop checks that
// Run returned without error.
func startRun(t *testing.T, cfg server.Config) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- server.Run(ctx, cfg) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// startCluster starts a dedicated PostgreSQL cluster (port 0: any free port) that the test
// halts and removes at its end.
func startCluster(t *testing.T, port int) *postgres.Cluster {
	t.Helper()
	dir, err := os.MkdirTemp("", "ironflow-server-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	pg, err := postgres.StartOnPort(context.Background(), dir, port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Halt() }) // a no-op error when the test halted it already
	return pg
}

func healthy(base string) bool {
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// stdoutCapture holds what is written to os.Stdout while it is captured.
type stdoutCapture struct {
	syncBuffer
	restore func()
}

// Close restores os.Stdout and returns everything written to it; the test's cleanup calls it too.
func (c *stdoutCapture) Close() string {
	c.restore()
	return c.String()
}

// captureStdout sends os.Stdout to a buffer until Close or the end of the test.
func captureStdout(t *testing.T) *stdoutCapture {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	c := &stdoutCapture{}
	copied := make(chan struct{})
	go func() {
		io.Copy(&c.syncBuffer, r)
		close(copied)
	}()
	var once sync.Once
	c.restore = func() {
		once.Do(func() {
			os.Stdout = saved
			w.Close()
			<-copied
			r.Close()
		})
	}
	t.Cleanup(c.restore)
	return c
}
