package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/region/api"
)

// logsRegion serves GET /machines/Name:birdy/logs like the region: oldest first, After and
// Since filters, limit; it records the queries.
type logsRegion struct {
	mu      sync.Mutex
	logs    []api.SyslogMessage
	queries []string
}

func (l *logsRegion) add(text string, received time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.logs = append(l.logs, api.SyslogMessage{ID: int64(len(l.logs) + 1), Machine: "m-1", Addr: "10.77.0.100", MAC: "52:54:00:12:34:56",
		Received: received, Facility: 1, Severity: 6, Hostname: "birdy", App: "kernel", Text: text})
}

func (l *logsRegion) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/v1/machines/Name:birdy/logs" {
		answer(w, http.StatusNotFound, api.Error{Error: "machines " + r.URL.Path + " not found", Code: 404})
		return
	}
	q := r.URL.Query()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.queries = append(l.queries, r.URL.RawQuery)
	after, _ := strconv.ParseInt(q.Get("After"), 10, 64)
	since, _ := time.Parse(time.RFC3339Nano, q.Get("Since"))
	limit, _ := strconv.Atoi(q.Get("limit"))
	out := []api.SyslogMessage{}
	for _, m := range l.logs {
		if m.ID > after && !m.Received.Before(since) && len(out) < limit {
			out = append(out, m)
		}
	}
	answer(w, http.StatusOK, out)
}

func (l *logsRegion) seen() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.queries...)
}

func startLogsRegion(t *testing.T) (*logsRegion, string) {
	l := &logsRegion{}
	srv := httptest.NewServer(l)
	t.Cleanup(srv.Close)
	return l, srv.URL
}

func TestMachineLogsPrintsLines(t *testing.T) {
	l, url := startLogsRegion(t)
	at := time.Date(2026, 12, 1, 15, 0, 1, 0, time.UTC)
	l.add("hello over UDP", at)
	l.add(`Reached target \x1b[1mMulti-User`, at.Add(time.Second))
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"-E", url, "machines", "logs", "Name:birdy", "--since", "2026-12-01T15:00:00Z"}, nil, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	want := "2026-12-01T15:00:01Z 10.77.0.100 info    birdy kernel: hello over UDP\n" +
		"2026-12-01T15:00:02Z 10.77.0.100 info    birdy kernel: Reached target \\x1b[1mMulti-User\n"
	if out.String() != want {
		t.Fatalf("output\n%s\nwant\n%s", out.String(), want)
	}
	if q := l.seen(); len(q) != 1 || !strings.Contains(q[0], "Since=2026-12-01T15%3A00%3A00Z") {
		t.Fatalf("queries %q", q)
	}
	out.Reset()
	if code := run(context.Background(), []string{"-E", url, "machines", "logs", "Name:birdy", "-o", "json"}, nil, &out, &errOut); code != 0 || strings.Count(out.String(), "\n") != 2 || !strings.HasPrefix(out.String(), `{"ID":1,`) {
		t.Fatalf("json lines: exit %d: %s", code, out.String())
	}
}

// TestMachineLogsEscapesWhatTheRegionSendsRaw: control, bidi and zero-width characters a
// region sends raw (stored before they were escaped, or a region that does not escape) are
// printed escaped in every field, as text lines and as JSON, so that no line shows
// differently from what it holds.
func TestMachineLogsEscapesWhatTheRegionSendsRaw(t *testing.T) {
	l, url := startLogsRegion(t)
	l.add("invoice\u202efdp.exe\u202c\u200b\x1b[2J", time.Date(2026, 12, 1, 15, 0, 1, 0, time.UTC))
	l.logs[0].Hostname, l.logs[0].App, l.logs[0].ProcID = "birdy\u2066", "kernel\u2028", "1\ufeff"
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"-E", url, "machines", "logs", "Name:birdy"}, nil, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if want := `2026-12-01T15:00:01Z 10.77.0.100 info    birdy\u2066 kernel\u2028[1\ufeff]: invoice\u202efdp.exe\u202c\u200b\x1b[2J` + "\n"; out.String() != want {
		t.Fatalf("output\n%q\nwant\n%q", out.String(), want)
	}
	out.Reset()
	if code := run(context.Background(), []string{"-E", url, "machines", "logs", "Name:birdy", "-o", "json"}, nil, &out, &errOut); code != 0 {
		t.Fatalf("json: exit %d: %s", code, errOut.String())
	}
	var m api.SyslogMessage
	if err := json.Unmarshal(out.Bytes(), &m); err != nil || m.Text != `invoice\u202efdp.exe\u202c\u200b\x1b[2J` || m.Hostname != `birdy\u2066` || m.App != `kernel\u2028` || m.ProcID != `1\ufeff` {
		t.Fatalf("json line %s (%v), want every field escaped", out.String(), err)
	}
}

// TestMachineLogsFollow: --follow prints what arrives later, asking only for messages after
// the last one printed, and an interrupt ends it with exit 0.
func TestMachineLogsFollow(t *testing.T) {
	l, url := startLogsRegion(t)
	l.add("first", time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	var out testutil.SafeBuffer
	var errOut bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"-E", url, "machines", "logs", "Name:birdy", "--follow"}, nil, &out, &errOut)
	}()
	testutil.Eventually(t, 5*time.Second, "the first message", func() bool { return strings.Contains(out.String(), "first") })
	l.add("second", time.Now())
	testutil.Eventually(t, 5*time.Second, "the second message", func() bool { return strings.Contains(out.String(), "second") })
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d after interrupt: %s", code, errOut.String())
	}
	if n := strings.Count(out.String(), "first"); n != 1 {
		t.Fatalf("first printed %d times:\n%s", n, out.String())
	}
	for _, q := range l.seen()[1:] {
		if !strings.Contains(q, "After=1") && !strings.Contains(q, "After=2") {
			t.Fatalf("a later poll asked %q, want only messages after those printed", q)
		}
	}
}

func TestMachineLogsBadInput(t *testing.T) {
	l, url := startLogsRegion(t)
	for _, args := range [][]string{
		{"machines", "logs", "Name:birdy", "--since", "yesterday"},
		{"machines", "logs", "Name:birdy", "-o", "yaml"},
		{"machines", "logs"},
		{"machines", "logs", "Name:nobody"},
	} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), append([]string{"-E", url}, args...), nil, &out, &errOut); code == 0 || errOut.Len() == 0 {
			t.Errorf("%q: exit %d, stderr %q: want a failure with a message", args, code, errOut.String())
		}
	}
	if q := l.seen(); len(q) != 0 {
		t.Fatalf("queries %q: bad flags must fail before any request", q)
	}
}
