package proxy

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	itest "github.com/ironflow/ironflow/internal/testutil"
)

var loopback = netip.MustParseAddr("127.0.0.1")

// upstream is a mirror on loopback serving files with validators; it counts the requests
// of each path and the conditional ones.
type mirror struct {
	*httptest.Server
	mu          sync.Mutex
	files       map[string]string
	requests    map[string]int
	conditional map[string]int
	modified    time.Time
}

func newMirror(t *testing.T, files map[string]string) *mirror {
	m := &mirror{files: files, requests: map[string]int{}, conditional: map[string]int{}, modified: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	m.Server = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.Close)
	return m
}

func (m *mirror) serve(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	m.requests[r.URL.Path]++
	if r.Header.Get("If-None-Match") != "" || r.Header.Get("If-Modified-Since") != "" {
		m.conditional[r.URL.Path]++
	}
	body, ok := m.files[r.URL.Path]
	m.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("ETag", `"`+etagOf(body)+`"`)
	http.ServeContent(w, r, "", m.modified, strings.NewReader(body))
}

func etagOf(body string) string { return keyOf(body)[:16] }

func (m *mirror) set(path, body string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[path] = body
}

// counts are the requests of path the mirror saw, and how many were conditional.
func (m *mirror) counts(path string) (all, conditional int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.requests[path], m.conditional[path]
}

type harness struct {
	srv    *Server
	reg    *prometheus.Registry
	cache  *Cache
	addr   string // the proxy's
	client *http.Client
}

// options of a test proxy: loopback clients are its subnet, the mirror's address its only
// permitted loopback target.
type options struct {
	cfg        Config
	cacheBytes int64  // 0: no cache
	cacheDir   string // default a temporary directory
}

func newHarness(t *testing.T, adjust ...func(*options)) *harness {
	t.Helper()
	o := options{
		cfg: Config{
			Serves:   func(a netip.Addr) bool { return a.IsLoopback() },
			Targets:  Targets{permit: []netip.Addr{loopback}},
			Settings: Settings{Enabled: true, ConnectPorts: []int{443}},
		},
		cacheBytes: 1 << 20,
	}
	for _, f := range adjust {
		f(&o)
	}
	h := &harness{reg: prometheus.NewRegistry()}
	if o.cacheBytes > 0 {
		if o.cacheDir == "" {
			o.cacheDir = t.TempDir()
		}
		c, err := OpenCache(o.cacheDir, o.cacheBytes)
		if err != nil {
			t.Fatal(err)
		}
		h.cache, o.cfg.Cache = c, c
	}
	o.cfg.Registry = h.reg
	srv, err := New(o.cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.srv = srv
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.addr = ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.ServeListener(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("proxy: %v", err)
		}
	})
	proxyURL := &url.URL{Scheme: "http", Host: h.addr}
	h.client = &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL), DisableKeepAlives: true}, Timeout: 10 * time.Second}
	return h
}

// waitFor polls cond until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	itest.Eventually(t, 10*time.Second, what, cond)
}

// get fetches u through the proxy: status, body, X-Cache, and the body's read error. It
// returns once the proxy is done with every request (an object stored, a counter moved),
// which happens after the client read the last byte.
func (h *harness) get(t *testing.T, u string, header ...string) (int, string, string, error) {
	t.Helper()
	code, body, xcache, err := h.fetch(t, u, header...)
	waitFor(t, "the proxy done with its requests", func() bool { return h.counter("in-flight") == 0 })
	return code, body, xcache, err
}

// fetch is get without the wait, for clients running at once.
func (h *harness) fetch(t *testing.T, u string, header ...string) (int, string, string, error) {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return 0, "", "", err
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("X-Cache"), err
}

func (h *harness) counter(name string, labels ...string) float64 {
	switch name {
	case "requests":
		return testutil.ToFloat64(h.srv.m.requests.WithLabelValues(labels...))
	case "refusals":
		return testutil.ToFloat64(h.srv.m.refusals.WithLabelValues(labels...))
	case "upstream-errors":
		return testutil.ToFloat64(h.srv.m.upstreamErr)
	case "in-flight":
		return testutil.ToFloat64(h.srv.m.inFlight)
	case "cache-errors":
		return testutil.ToFloat64(h.srv.m.cacheErr)
	}
	panic("no counter " + name)
}
