package regionlink

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/rack/regionlink/regionlinktest"
)

func newLink(t *testing.T, dir string, endpoints ...string) *Link {
	t.Helper()
	l, err := New(Config{Endpoints: endpoints, StateDir: dir, FailAfter: 3, CheckTimeout: time.Second,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestFailoverAndBack(t *testing.T) {
	tests := []struct {
		name       string
		fail, heal func(r *regionlinktest.Region)
	}{
		{"healthz 503", func(r *regionlinktest.Region) { r.SetHealthy(false) }, func(r *regionlinktest.Region) { r.SetHealthy(true) }},
		{"process killed", (*regionlinktest.Region).Close, (*regionlinktest.Region).Restart},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := regionlinktest.Start(t, "a"), regionlinktest.Start(t, "b")
			l := newLink(t, t.TempDir(), a.URL, b.URL)
			ctx := context.Background()
			l.checkAll(ctx)
			if got := l.Current().String(); got != a.URL {
				t.Fatalf("current = %s, want preferred %s", got, a.URL)
			}
			tt.fail(a)
			for round := 1; round <= 3; round++ {
				l.checkAll(ctx)
				want := a.URL
				if round == 3 {
					want = b.URL // FailAfter consecutive failures
				}
				if got := l.Current().String(); got != want {
					t.Fatalf("after %d failed checks current = %s, want %s", round, got, want)
				}
			}
			tt.heal(a)
			l.checkAll(ctx)
			if got := l.Current().String(); got != a.URL {
				t.Fatalf("after recovery current = %s, want preferred %s", got, a.URL)
			}
		})
	}
}

func TestIntermittentFailureDoesNotFailOver(t *testing.T) {
	a, b := regionlinktest.Start(t, "a"), regionlinktest.Start(t, "b")
	l := newLink(t, t.TempDir(), a.URL, b.URL)
	ctx := context.Background()
	for _, healthy := range []bool{false, false, true, false, false, true} {
		a.SetHealthy(healthy)
		l.checkAll(ctx)
		if got := l.Current().String(); got != a.URL {
			t.Fatalf("current = %s after non-consecutive failures, want %s", got, a.URL)
		}
	}
}

func TestLearnedEndpointsSurviveRestart(t *testing.T) {
	a, b, c := regionlinktest.Start(t, "a"), regionlinktest.Start(t, "b"), regionlinktest.Start(t, "c")
	a.SetEndpoints(a.URL, b.URL, c.URL)
	dir := t.TempDir()
	l := newLink(t, dir, a.URL)
	l.refresh(context.Background())
	want := []string{a.URL, b.URL, c.URL}
	if got := l.Endpoints(); !slices.Equal(got, want) {
		t.Fatalf("learned endpoints %v, want %v", got, want)
	}

	// A restarted rack whose flags still name a stale region uses the persisted list.
	restarted := newLink(t, dir, "http://127.0.0.1:1")
	if got := restarted.Endpoints(); !slices.Equal(got, want) {
		t.Fatalf("after restart endpoints %v, want %v", got, want)
	}
	a.Close()
	b.Close()
	for range 3 {
		restarted.checkAll(context.Background())
	}
	if got := restarted.Current().String(); got != c.URL {
		t.Fatalf("with a and b down current = %s, want learned %s", got, c.URL)
	}
}

func TestBrokenStateFileIsAnError(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, stateFile), []byte(`{"Configured": ["ftp://x"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Endpoints: []string{"http://127.0.0.1:1"}, StateDir: dir}); err == nil {
		t.Fatal("New accepted a persisted list with an ftp URL")
	}
}

func TestDoFailsOver(t *testing.T) {
	a, b := regionlinktest.Start(t, "a"), regionlinktest.Start(t, "b")
	l := newLink(t, t.TempDir(), a.URL, b.URL)
	a.Close()
	tests := []struct {
		name, method, body string
		wrap               func(io.Reader) io.Reader // hides the reader type so no GetBody is set
	}{
		{"GET", http.MethodGet, "", nil},
		{"POST with GetBody", http.MethodPost, `{"job":"log line"}`, nil},
		{"POST streamed", http.MethodPost, `{"job":"streamed"}`, func(r io.Reader) io.Reader { return io.NopCloser(r) }},
		{"PUT streamed", http.MethodPut, "put body", func(r io.Reader) io.Reader { return io.NopCloser(r) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
				if tt.wrap != nil {
					body = tt.wrap(body)
				}
			}
			req, err := http.NewRequest(tt.method, "/api/v1/agent/machines/m1?x=1", body)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := l.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var echo regionlinktest.Echo
			if err := json.NewDecoder(resp.Body).Decode(&echo); err != nil {
				t.Fatal(err)
			}
			if echo.Region != "b" || echo.Method != tt.method || echo.Path != "/api/v1/agent/machines/m1" ||
				echo.RawQuery != "x=1" || echo.Body != tt.body {
				t.Fatalf("echo %+v, want region b, %s, body %q", echo, tt.method, tt.body)
			}
		})
	}

	b.Close()
	req, _ := http.NewRequest(http.MethodGet, "/metadata/latest", nil)
	if _, err := l.Do(req); err == nil || !strings.Contains(err.Error(), "region unreachable") {
		t.Fatalf("Do with every region down: err = %v", err)
	}
}

func TestDoReturnsRedirects(t *testing.T) {
	a := regionlinktest.Start(t, "a")
	l := newLink(t, t.TempDir(), a.URL)
	req, _ := http.NewRequest(http.MethodGet, "/api/v1/agent/x?redirect=http://other:5240/api/v1/agent/x", nil)
	resp, err := l.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect {
		t.Fatalf("status %d, want the region's 307 passed through", resp.StatusCode)
	}
}

func TestSwapEndpoints(t *testing.T) {
	a, b := regionlinktest.Start(t, "a"), regionlinktest.Start(t, "b")
	dir := t.TempDir()
	l := newLink(t, dir, a.URL)
	for _, bad := range [][]string{nil, {"not a url"}, {"ftp://x"}, {b.URL, "http://"}, {"http://h/?q=1"}} {
		if err := l.SwapEndpoints(bad); err == nil {
			t.Fatalf("SwapEndpoints(%q) accepted", bad)
		}
		if got := l.Endpoints(); !slices.Equal(got, []string{a.URL}) {
			t.Fatalf("rejected swap changed endpoints to %v", got)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, stateFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("rejected swaps wrote a state file: %v", err)
	}
	if err := l.SwapEndpoints([]string{b.URL + "/", b.URL}); err != nil {
		t.Fatal(err)
	}
	if got := l.Current().String(); got != b.URL {
		t.Fatalf("current after swap = %s, want %s", got, b.URL)
	}
	if got := newLink(t, dir, a.URL).Endpoints(); !slices.Equal(got, []string{b.URL}) {
		t.Fatalf("swapped list after restart = %v, want [%s]", got, b.URL)
	}
}

func TestServeLoop(t *testing.T) {
	a, b := regionlinktest.Start(t, "a"), regionlinktest.Start(t, "b")
	l, err := New(Config{Endpoints: []string{a.URL, b.URL}, StateDir: t.TempDir(), FailAfter: 2,
		Interval: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- l.Serve(ctx) }()
	a.SetHealthy(false)
	testutil.Eventually(t, 10*time.Second, "the link to fail over to b", func() bool { return l.Current().String() == b.URL })
	a.SetHealthy(true)
	testutil.Eventually(t, 10*time.Second, "the link to return to a", func() bool { return l.Current().String() == a.URL })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
