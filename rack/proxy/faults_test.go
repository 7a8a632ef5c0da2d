package proxy

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cutUpstream answers with a body of full bytes but sends half, then closes the connection
// (cut) or holds it open without sending more (hang, until the test ends). With chunked, the
// answer has no Content-Length: only the missing last chunk tells the body is cut.
func cutUpstream(t *testing.T, full int, hang, chunked bool) *mirror {
	release := make(chan struct{})
	m := newMirror(t, nil)
	m.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.requests[r.URL.Path]++
		m.mu.Unlock()
		if !chunked {
			w.Header().Set("Content-Length", fmt.Sprint(full))
		}
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, strings.Repeat("h", full/2))
		w.(http.Flusher).Flush()
		if hang {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		panic(http.ErrAbortHandler)
	})
	t.Cleanup(func() { close(release) })
	return m
}

// TestTruncatedUpstreamBodyIsNotServedWholeNorCached: an upstream that cuts its body short,
// or stops sending it, gives the client an error, stores nothing, and the next request asks
// the upstream again.
func TestTruncatedUpstreamBodyIsNotServedWholeNorCached(t *testing.T) {
	for _, c := range []struct{ hang, chunked bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		t.Run(fmt.Sprintf("hang=%v,chunked=%v", c.hang, c.chunked), func(t *testing.T) {
			m := cutUpstream(t, 100000, c.hang, c.chunked)
			h := newHarness(t, func(o *options) { o.cfg.Limits.StallTimeout = 300 * time.Millisecond })
			for i := range 2 {
				_, body, _, err := h.get(t, m.URL+"/pool/cut.deb")
				if err == nil {
					t.Fatalf("fetch %d: a body of %d bytes without an error", i, len(body))
				}
			}
			if n, _ := m.counts("/pool/cut.deb"); n != 2 {
				t.Errorf("the upstream saw %d requests, want 2: a cut object was cached", n)
			}
			if b, n := h.cache.Size(); b != 0 || n != 0 {
				t.Errorf("the cache holds %d objects, %d bytes", n, b)
			}
			if h.counter("upstream-errors") != 2 {
				t.Errorf("upstream errors %v, want 2", h.counter("upstream-errors"))
			}
		})
	}
}

// TestCacheStaysWithinItsLimit: the least recently used objects are evicted; an object
// bigger than the cache is served, not stored.
func TestCacheStaysWithinItsLimit(t *testing.T) {
	files := map[string]string{}
	for i := range 5 {
		files[fmt.Sprintf("/pool/p%d.deb", i)] = strings.Repeat(fmt.Sprint(i), 3000)
	}
	files["/pool/huge.deb"] = strings.Repeat("h", 20000)
	m := newMirror(t, files)
	const limit = 10000 // three objects and their trailers
	h := newHarness(t, func(o *options) { o.cacheBytes = limit })
	fetch := func(i int) {
		if _, body, _, err := h.get(t, m.URL+fmt.Sprintf("/pool/p%d.deb", i)); err != nil || body != files[fmt.Sprintf("/pool/p%d.deb", i)] {
			t.Fatalf("p%d: %v", i, err)
		}
	}
	fetch(0)
	fetch(1)
	fetch(2)
	fetch(0) // p1 is now the least recently used
	fetch(3)
	if b, n := h.cache.Size(); b > limit || n != 3 {
		t.Errorf("the cache holds %d objects, %d bytes (limit %d)", n, b, limit)
	}
	fetch(0)
	fetch(1)
	for i, want := range []int{1, 2, 1, 1} {
		if n, _ := m.counts(fmt.Sprintf("/pool/p%d.deb", i)); n != want {
			t.Errorf("p%d fetched %d times upstream, want %d", i, n, want)
		}
	}
	for range 2 {
		if _, body, _, err := h.get(t, m.URL+"/pool/huge.deb"); err != nil || body != files["/pool/huge.deb"] {
			t.Fatalf("huge: %v", err)
		}
	}
	if n, _ := m.counts("/pool/huge.deb"); n != 2 {
		t.Errorf("an object over the limit fetched %d times, want 2 (never stored)", n)
	}
}

// TestDamagedObjectIsNotServed: a cached file cut short on disk (a crash, a disk error) is
// dropped and fetched again; the cache reopened over it does not list it.
func TestDamagedObjectIsNotServed(t *testing.T) {
	const path = "/pool/d.deb"
	body := strings.Repeat("d", 5000)
	m := newMirror(t, map[string]string{path: body})
	h := newHarness(t)
	h.get(t, m.URL+path)
	file := filepath.Join(h.cache.dir, keyOf(m.URL+path))
	if err := os.Truncate(file, 4000); err != nil {
		t.Fatal(err)
	}
	if c, err := OpenCache(h.cache.dir, 1<<20); err != nil {
		t.Fatal(err)
	} else if _, n := c.Size(); n != 0 {
		t.Errorf("a reopened cache lists %d objects over a damaged file", n)
	}
	if err := os.WriteFile(file, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, got, xcache, err := h.get(t, m.URL+path); err != nil || got != body || xcache != "MISS" {
		t.Fatalf("over a damaged file: X-Cache %s, equal %v, %v", xcache, got == body, err)
	}
	if _, got, xcache, _ := h.get(t, m.URL+path); got != body || xcache != "HIT" {
		t.Fatalf("stored again: X-Cache %s", xcache)
	}
}

// TestCacheDiskFull: with the cache's file system full, clients still get whole objects,
// nothing half-written is kept, and the failure is counted.
func TestCacheDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	body := strings.Repeat("f", 200<<10)
	m := newMirror(t, map[string]string{"/pool/full.deb": body})
	h := newHarness(t, func(o *options) { o.cacheDir, o.cacheBytes = dir, 1<<30 }) // the limit says yes, the disk says no
	for range 2 {
		if _, got, _, err := h.get(t, m.URL+"/pool/full.deb"); err != nil || got != body {
			t.Fatalf("with the disk full: %d bytes, %v", len(got), err)
		}
	}
	if h.counter("cache-errors") != 2 {
		t.Errorf("cache write errors %v, want 2", h.counter("cache-errors"))
	}
	left, err := os.ReadDir(filepath.Join(dir, tmpDir))
	if err != nil || len(left) != 0 {
		t.Errorf("left in the cache's tmp: %v %v", left, err)
	}
}

// TestOneClientCannotHoldEveryConnection: connections of one address over its limit are
// closed at once, and another client is served meanwhile; a closed connection frees its slot.
func TestOneClientCannotHoldEveryConnection(t *testing.T) {
	m := newMirror(t, map[string]string{"/a": "a"})
	h := newHarness(t, func(o *options) { o.cfg.Limits.MaxConnsPerClient = 3 })
	var held []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", h.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	waitFor(t, "the held connections accepted", func() bool {
		c, err := net.Dial("tcp", h.addr)
		if err != nil {
			return false
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = c.Read(make([]byte, 1))
		return err == io.EOF // closed unanswered
	})
	other := &http.Client{Transport: &http.Transport{
		Proxy:       http.ProxyURL(&url.URL{Scheme: "http", Host: h.addr}),
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext,
	}, Timeout: 10 * time.Second}
	resp, err := other.Get(m.URL + "/a")
	if err != nil {
		t.Fatalf("another client while one holds its limit: %v", err)
	}
	resp.Body.Close()
	held[0].Close()
	waitFor(t, "a freed slot taken again", func() bool {
		code, _, _, err := h.get(t, m.URL+"/a")
		return err == nil && code == http.StatusOK
	})
	if h.counter("refusals", refusedConns) < 1 {
		t.Errorf("no refused connection counted")
	}
}

// TestProxyLoopIsRefused: a request that came through a rack's proxy already (a parent proxy
// sending it back) is refused, not sent round again.
func TestProxyLoopIsRefused(t *testing.T) {
	m := newMirror(t, map[string]string{"/a": "a"})
	h := newHarness(t)
	if code, _, _, _ := h.get(t, m.URL+"/a", "Via", "1.1 squid, "+via); code != http.StatusLoopDetected {
		t.Errorf("a request through a rack's proxy already: %d, want 508", code)
	}
	if n, _ := m.counts("/a"); n != 0 {
		t.Errorf("the upstream saw it %d times", n)
	}
}

// TestCacheSurvivesARestart: a rack restarted over its cache serves what it stored.
func TestCacheSurvivesARestart(t *testing.T) {
	const path = "/pool/kept.deb"
	body := strings.Repeat("k", 5000)
	m := newMirror(t, map[string]string{path: body})
	dir := t.TempDir()
	newHarness(t, func(o *options) { o.cacheDir = dir }).get(t, m.URL+path)
	h := newHarness(t, func(o *options) { o.cacheDir = dir })
	if _, got, xcache, err := h.get(t, m.URL+path); err != nil || got != body || xcache != "HIT" {
		t.Fatalf("after a restart: X-Cache %s, equal %v, %v", xcache, got == body, err)
	}
	if n, _ := m.counts(path); n != 1 {
		t.Errorf("the upstream saw %d requests, want 1", n)
	}
}
