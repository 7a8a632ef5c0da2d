package proxy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	itest "github.com/ironflow/ironflow/internal/testutil"
)

// The benchmark's objects and caches: squid gets the same cache size on disk and no memory
// cache, so both serve hits from a disk cache (the page cache in practice).
const (
	benchObjectBytes = 256 << 10 // a small .deb
	benchHotObjects  = 16
	benchCacheMB     = 512
)

// BenchmarkProxy compares the rack's proxy with squid (Debian's, when installed) on one
// machine: cached hits and misses (every request a new URL), with 1 and 50 concurrent
// clients, over keep-alive connections, the upstream a Go server on loopback. It reports
// req/s and MB/s (of bodies).
//
//	go test -run '^$' -bench BenchmarkProxy -benchtime 5s ./rack/proxy
func BenchmarkProxy(b *testing.B) {
	body := strings.Repeat("0123456789abcdef", benchObjectBytes/16)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=86400")
		w.Header().Set("ETag", `"`+etagOf(r.URL.Path)+`"`)
		http.ServeContent(w, r, "", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), strings.NewReader(body))
	}))
	defer upstream.Close()
	proxies := map[string]string{"ironflow": benchIronflow(b)}
	if addr, ok := benchSquid(b); ok {
		proxies["squid"] = addr
	}
	for _, name := range []string{"ironflow", "squid"} {
		addr, ok := proxies[name]
		if !ok {
			continue
		}
		for _, kind := range []string{"hit", "miss"} {
			for _, clients := range []int{1, 50} {
				b.Run(fmt.Sprintf("%s/%s/clients=%d", name, kind, clients), func(b *testing.B) {
					benchRequests(b, addr, upstream.URL, kind, clients, len(body))
				})
			}
		}
	}
}

var benchRun atomic.Int64 // distinguishes the miss URLs of each run

func benchRequests(b *testing.B, proxyAddr, upstream, kind string, clients, size int) {
	proxyURL := &url.URL{Scheme: "http", Host: proxyAddr}
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL), MaxIdleConnsPerHost: clients, DisableCompression: true}}
	defer c.CloseIdleConnections()
	get := func(u string) error {
		resp, err := c.Get(u)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		n, err := io.Copy(io.Discard, resp.Body)
		if err == nil && (resp.StatusCode != http.StatusOK || n != int64(size)) {
			err = fmt.Errorf("%s: %s, %d bytes", u, resp.Status, n)
		}
		return err
	}
	run := benchRun.Add(1)
	urlOf := func(i int64) string {
		if kind == "hit" {
			return fmt.Sprintf("%s/pool/hot-%d.deb", upstream, i%benchHotObjects)
		}
		return fmt.Sprintf("%s/pool/miss-%d-%d.deb", upstream, run, i)
	}
	if kind == "hit" {
		for i := range int64(benchHotObjects) {
			for range 2 { // squid stores an object after its first answer
				if err := get(urlOf(i)); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.SetBytes(int64(size))
	b.ResetTimer()
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	for range clients {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(b.N); i = next.Add(1) - 1 {
				if err := get(urlOf(i)); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
}

// benchIronflow serves the rack's proxy on loopback with a disk cache of benchCacheMB.
func benchIronflow(b *testing.B) string {
	cache, err := OpenCache(b.TempDir(), benchCacheMB<<20)
	if err != nil {
		b.Fatal(err)
	}
	srv, err := New(Config{Serves: func(netip.Addr) bool { return true }, Targets: Targets{permit: []netip.Addr{loopback}},
		Cache: cache, Settings: Settings{Enabled: true}, Registry: prometheus.NewRegistry(), Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.ServeListener(ctx, ln) }()
	b.Cleanup(func() {
		cancel()
		<-done
	})
	return ln.Addr().String()
}

// benchSquid starts squid (foreground, its own config and cache dir, stopped when the
// benchmark ends), or reports false when it is not installed.
func benchSquid(b *testing.B) (string, bool) {
	bin, err := exec.LookPath("squid")
	if err != nil {
		b.Log("squid is not installed: benchmarking the rack's proxy alone")
		return "", false
	}
	dir, err := os.MkdirTemp("", "ironflow-bench-squid-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	conf := filepath.Join(dir, "squid.conf")
	if err := os.WriteFile(conf, []byte(strings.NewReplacer("@DIR@", dir, "@ADDR@", addr, "@MB@", fmt.Sprint(benchCacheMB)).Replace(`http_port @ADDR@
http_access allow all
cache_dir ufs @DIR@/cache @MB@ 16 256
cache_mem 0 MB
maximum_object_size 16 MB
refresh_pattern . 0 20% 4320
pid_filename @DIR@/squid.pid
coredump_dir @DIR@
cache_log @DIR@/cache.log
access_log none
cache_store_log none
shutdown_lifetime 0 seconds
cache_effective_user proxy
`)), 0o644); err != nil {
		b.Fatal(err)
	}
	if out, err := exec.Command("chown", "-R", "proxy", dir).CombinedOutput(); err != nil {
		b.Fatalf("chown: %v: %s", err, out)
	}
	if out, err := exec.Command(bin, "-N", "-z", "-f", conf).CombinedOutput(); err != nil {
		b.Fatalf("squid -z: %v: %s", err, out)
	}
	cmd := exec.Command(bin, "-N", "-f", conf)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	itest.Eventually(b, 30*time.Second, "squid listening", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return addr, true
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
