package httpboot

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ironflow/ironflow/rack/bootfs"
	"github.com/ironflow/ironflow/rack/regionlink"
	"github.com/ironflow/ironflow/region/api"
)

// machines is a MachineLookup over a map keyed by MAC string; errMAC makes lookups fail.
type machines struct {
	boots  map[string]Boot
	errMAC string
}

func (m machines) BootByMAC(_ context.Context, mac net.HardwareAddr) (Boot, bool, error) {
	if mac.String() == m.errMAC {
		return Boot{}, false, errors.New("region down and nothing cached")
	}
	b, ok := m.boots[mac.String()]
	return b, ok, nil
}

// enlister records the reports it forwards; err makes forwarding fail.
type enlister struct {
	mu      sync.Mutex
	reports []api.Enlistment
	err     error
}

func (e *enlister) Enlist(_ context.Context, r api.Enlistment) (api.EnlistResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return api.EnlistResult{}, e.err
	}
	e.reports = append(e.reports, r)
	return api.EnlistResult{Machine: "3a000000-0000-4000-8000-000000000001", Name: "new-1", Created: len(e.reports) == 1, Status: api.StatusNew}, nil
}

func (e *enlister) CommissioningScripts(context.Context) ([]api.CommissioningScript, error) {
	return []api.CommissioningScript{{Name: "uname", Script: "uname -a"}}, nil
}

var discovery = Boot{BootEnv: "discovery", Kernel: "discovery/vmlinuz", Initrds: []string{"discovery/initrd.img"},
	Cmdline: "console=ttyS0 ironflow.mode=enlist"}

type testRack struct {
	url      string // base URL of the HTTP boot server
	enlister *enlister
	dir      string // boot directory
	link     *regionlink.Link
	srv      *Server
}

// startRack serves a boot directory and proxies to the given regions; it stops with the test.
func startRack(t *testing.T, lookup MachineLookup, regions ...string) *testRack {
	t.Helper()
	return startRackWithLimits(t, Limits{}, lookup, regions...)
}

func startRackWithLimits(t *testing.T, limits Limits, lookup MachineLookup, regions ...string) *testRack {
	t.Helper()
	return startRackWithConfig(t, func(c *Config) { c.Limits = limits }, lookup, regions...)
}

// startRackWithConfig is startRack with adjust applied to the server's config.
func startRackWithConfig(t *testing.T, adjust func(*Config), lookup MachineLookup, regions ...string) *testRack {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "boot")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := bootfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	link, err := regionlink.New(regionlink.Config{Endpoints: regions, StateDir: t.TempDir(), FailAfter: 2,
		Interval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	enl := &enlister{}
	cfg := Config{Dir: d, Machines: lookup, Discovery: discovery, Region: link, Enlister: enl,
		Registry: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler)}
	adjust(&cfg)
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := srv.ServeListener(ctx, ln); err != nil {
			t.Error(err)
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		d.Close()
	})
	return &testRack{url: "http://" + ln.Addr().String(), dir: dir, link: link, srv: srv, enlister: enl}
}

// runLink runs the region link's health loop for the rest of the test.
func (r *testRack) runLink(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { r.link.Serve(ctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
}

func (r *testRack) writeFile(t *testing.T, name string, size int) []byte {
	t.Helper()
	data := make([]byte, size)
	rand.Read(data)
	path := filepath.Join(r.dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return data
}

// noRedirects is a client that shows redirects instead of following them.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func get(t *testing.T, url string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return do(t, req)
}

func do(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func contains(body []byte, want ...string) bool {
	for _, w := range want {
		if !strings.Contains(string(body), w) {
			return false
		}
	}
	return true
}
