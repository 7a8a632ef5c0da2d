package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRefusals: outsiders, other methods, origin-form and https URLs, bodies, privileged
// ports and CONNECT to a port not allowed are refused, each counted by reason.
func TestRefusals(t *testing.T) {
	m := newMirror(t, map[string]string{"/a": "a"})
	outsider := newHarness(t, func(o *options) { o.cfg.Serves = func(netip.Addr) bool { return false } })
	if code, _, _, _ := outsider.get(t, m.URL+"/a"); code != http.StatusForbidden {
		t.Errorf("outsider: %d, want 403", code)
	}
	if n, _ := m.counts("/a"); n != 0 || outsider.counter("refusals", refusedOutsider) != 1 {
		t.Errorf("outsider: mirror saw %d requests, refusals %v", n, outsider.counter("refusals", refusedOutsider))
	}

	h := newHarness(t)
	for _, c := range []struct {
		name, raw, reason string
		code              int
	}{
		{"POST", "POST " + m.URL + "/a HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", refusedMethod, 405},
		{"origin-form", "GET /a HTTP/1.1\r\nHost: " + h.addr + "\r\n\r\n", refusedRequest, 400},
		{"a GET with a body", "GET " + m.URL + "/a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc", refusedRequest, 413},
		{"a privileged port", "GET http://192.0.2.1:25/ HTTP/1.1\r\nHost: 192.0.2.1:25\r\n\r\n", refusedPort, 403},
		{"CONNECT to 22", "CONNECT 192.0.2.1:22 HTTP/1.1\r\nHost: 192.0.2.1:22\r\n\r\n", refusedPort, 403},
		{"CONNECT without a port", "CONNECT 192.0.2.1 HTTP/1.1\r\nHost: 192.0.2.1\r\n\r\n", refusedRequest, 400},
	} {
		before := h.counter("refusals", c.reason)
		if code := rawStatus(t, h.addr, c.raw); code != c.code {
			t.Errorf("%s: %d, want %d", c.name, code, c.code)
		}
		if h.counter("refusals", c.reason) != before+1 {
			t.Errorf("%s: not counted as %s", c.name, c.reason)
		}
	}
	if n, _ := m.counts("/a"); n != 0 {
		t.Errorf("the mirror saw %d requests of refused ones", n)
	}
}

// rawStatus sends a raw request to the proxy and returns the status of its answer.
func rawStatus(t *testing.T, addr, raw string) int {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestNoRequestReachesTheControlPlane: loopback (by address and by name), link-local (the
// cloud metadata address), the rack's own and its region's addresses are refused for GET
// and CONNECT alike, before anything is dialed.
func TestNoRequestReachesTheControlPlane(t *testing.T) {
	region := netip.MustParseAddr("192.0.2.10")
	h := newHarness(t, func(o *options) {
		o.cfg.Targets = Targets{ControlPlane: func() []netip.Addr { return []netip.Addr{region} }}
		o.cfg.Settings.ConnectPorts = []int{443, 5240}
	})
	for _, target := range []string{"127.0.0.1:8080", "localhost:8080", "169.254.169.254:80", "[::1]:8080", "[fe80::1]:80", "192.0.2.10:5240", "0.0.0.0:8080"} {
		before := h.counter("refusals", refusedTarget)
		if code, _, _, _ := h.get(t, "http://"+target+"/"); code != http.StatusForbidden {
			t.Errorf("GET %s: %d, want 403", target, code)
		}
		host, _, _ := net.SplitHostPort(target)
		connect := net.JoinHostPort(strings.Trim(host, "[]"), "5240")
		if code := rawStatus(t, h.addr, "CONNECT "+connect+" HTTP/1.1\r\nHost: "+connect+"\r\n\r\n"); code != http.StatusForbidden {
			t.Errorf("CONNECT %s: %d, want 403", connect, code)
		}
		if got := h.counter("refusals", refusedTarget); got != before+2 {
			t.Errorf("%s: %v target refusals, want %v", target, got, before+2)
		}
	}
}

// TestParentProxyIsNotAskedForTheControlPlane: with a parent proxy, which resolves and
// dials for the rack, refused targets are refused by the rack before the parent is asked.
func TestParentProxyIsNotAskedForTheControlPlane(t *testing.T) {
	parent := newMirror(t, map[string]string{})
	parentURL, _ := url.Parse(parent.URL)
	h := newHarness(t, func(o *options) {
		o.cfg.Targets = Targets{}
		o.cfg.Settings.Parent = parentURL
	})
	for _, target := range []string{"http://169.254.169.254/latest/meta-data/", "http://localhost:8080/", "http://127.0.0.1:5240/"} {
		if code, _, _, _ := h.get(t, target); code != http.StatusForbidden {
			t.Errorf("GET %s through the parent: %d, want 403", target, code)
		}
	}
	parent.mu.Lock()
	defer parent.mu.Unlock()
	if len(parent.requests) != 0 {
		t.Errorf("the parent proxy was asked %v", parent.requests)
	}
}

// TestParentProxyCarriesRequests: with a parent proxy, requests go to it in absolute form.
func TestParentProxyCarriesRequests(t *testing.T) {
	var got []string
	var mu sync.Mutex
	parent := newMirror(t, nil)
	parent.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.RequestURI)
		mu.Unlock()
		io.WriteString(w, "via the parent")
	})
	parentURL, _ := url.Parse(parent.URL)
	h := newHarness(t, func(o *options) { o.cfg.Settings.Parent = parentURL })
	if _, body, _, err := h.get(t, "http://mirror.example.org/debian/pool/x.deb"); err != nil || body != "via the parent" {
		t.Fatalf("through the parent: %q %v", body, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != "GET http://mirror.example.org/debian/pool/x.deb" {
		t.Errorf("the parent got %q", got)
	}
}

// TestSubnetParentProxy: the clients of a subnet with a parent of its own go through it,
// the others through the region's.
func TestSubnetParentProxy(t *testing.T) {
	parents := map[string]*mirror{}
	for _, name := range []string{"region", "subnet"} {
		m := newMirror(t, nil)
		m.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "via "+name) })
		parents[name] = m
	}
	parentURL := func(name string) *url.URL { u, _ := url.Parse(parents[name].URL); return u }
	h := newHarness(t, func(o *options) {
		o.cacheBytes = 0
		o.cfg.Settings.Parent = parentURL("region")
		o.cfg.Settings.SubnetParents = []SubnetParent{{Prefix: netip.MustParsePrefix("127.0.0.2/32"), Parent: parentURL("subnet")}}
	})
	from := func(a net.IP) *http.Client {
		return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: h.addr}),
			DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: a}}).DialContext}, Timeout: 10 * time.Second}
	}
	for client, want := range map[string]string{"127.0.0.1": "via region", "127.0.0.2": "via subnet"} {
		resp, err := from(net.ParseIP(client)).Get("http://mirror.example.org/x")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != want {
			t.Errorf("client %s: %q, want %q", client, body, want)
		}
	}
}

// TestTargetsCheckTheAddressDialed: a name resolving to an allowed address at the check
// but connecting to a refused one (a DNS rebinding) is caught by the dialer itself.
func TestTargetsCheckTheAddressDialed(t *testing.T) {
	_, err := Targets{}.dialer(time.Second).Dial("tcp", "127.0.0.1:9")
	if err == nil || !strings.Contains(err.Error(), ErrForbiddenTarget.Error()) {
		t.Fatalf("dialing loopback: %v, want %v", err, ErrForbiddenTarget)
	}
}

// TestConnectTunnelsToAnAllowedPort: CONNECT to an allowed port carries bytes both ways.
func TestConnectTunnelsToAnAllowedPort(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		c, err := echo.Accept()
		if err == nil {
			io.Copy(c, c)
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(echo.Addr().String())
	h := newHarness(t, func(o *options) { o.cfg.Settings.ConnectPorts = []int{atoi(port)} })
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %[1]s\r\n\r\nhello", echo.Addr())
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	got := make([]byte, 5)
	if _, err := io.ReadFull(br, got); err != nil || string(got) != "hello" {
		t.Fatalf("through the tunnel: %q %v", got, err)
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}

// TestSecondFetchIsAHit: a package file is fetched once from the mirror and then served
// from the cache, the same bytes.
func TestSecondFetchIsAHit(t *testing.T) {
	body := strings.Repeat("deb!", 10000)
	m := newMirror(t, map[string]string{"/pool/main/h/hello/hello_1.0_amd64.deb": body})
	h := newHarness(t)
	for i, want := range []string{"MISS", "HIT"} {
		code, got, xcache, err := h.get(t, m.URL+"/pool/main/h/hello/hello_1.0_amd64.deb")
		if err != nil || code != 200 || got != body || xcache != want {
			t.Fatalf("fetch %d: %d %v X-Cache %s, body equal %v; want %s", i, code, err, xcache, got == body, want)
		}
	}
	if n, _ := m.counts("/pool/main/h/hello/hello_1.0_amd64.deb"); n != 1 {
		t.Errorf("the mirror saw %d requests, want 1", n)
	}
	if h.counter("requests", resultHit) != 1 || h.counter("requests", resultMiss) != 1 {
		t.Errorf("hits %v misses %v", h.counter("requests", resultHit), h.counter("requests", resultMiss))
	}
}

// TestIndexesAreRevalidated: an apt index is asked of the mirror every time, conditionally:
// unchanged, the cached copy is served; changed, the new one is served and stored.
func TestIndexesAreRevalidated(t *testing.T) {
	const path = "/debian/dists/stable/InRelease"
	m := newMirror(t, map[string]string{path: "release 1"})
	h := newHarness(t)
	for i, want := range []struct{ body, xcache string }{{"release 1", "MISS"}, {"release 1", "HIT"}} {
		if _, got, xcache, err := h.get(t, m.URL+path); err != nil || got != want.body || xcache != want.xcache {
			t.Fatalf("fetch %d: %q X-Cache %s %v, want %q %s", i, got, xcache, err, want.body, want.xcache)
		}
	}
	if n, cond := m.counts(path); n != 2 || cond != 1 {
		t.Fatalf("the mirror saw %d requests (%d conditional), want 2 (1)", n, cond)
	}
	m.set(path, "release 2")
	m.modified = m.modified.Add(time.Hour)
	if _, got, xcache, _ := h.get(t, m.URL+path); got != "release 2" || xcache != "MISS" {
		t.Fatalf("after a change: %q %s", got, xcache)
	}
	if _, got, xcache, _ := h.get(t, m.URL+path); got != "release 2" || xcache != "HIT" {
		t.Fatalf("the changed index again: %q %s", got, xcache)
	}
	// A client holding the current copy is answered 304 after the cache's own revalidation.
	if code, body, _, _ := h.get(t, m.URL+path, "If-None-Match", `"`+etagOf("release 2")+`"`); code != http.StatusNotModified || body != "" {
		t.Errorf("a client's conditional request of an unchanged index: %d %q, want 304", code, body)
	}
	if h.counter("requests", resultRevalidated) != 3 {
		t.Errorf("revalidated %v, want 3", h.counter("requests", resultRevalidated))
	}
}

// TestConcurrentMissesFetchOnce: clients asking for the same uncached object at once cause
// one upstream fetch; every one gets the whole object.
func TestConcurrentMissesFetchOnce(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	fetches := 0
	body := strings.Repeat("x", 100000)
	up := newMirror(t, nil)
	up.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		fetches++
		mu.Unlock()
		<-release
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		io.WriteString(w, body)
	})
	h := newHarness(t)
	released := false
	t.Cleanup(func() { // before the servers' cleanups, which wait for their handlers
		if !released {
			close(release)
		}
	})
	const clients = 20
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for range clients {
		wg.Go(func() {
			_, got, _, err := h.fetch(t, up.URL+"/pool/big.deb")
			if err == nil && got != body {
				err = fmt.Errorf("a body of %d bytes", len(got))
			}
			errs <- err
		})
	}
	waitFor(t, "every client waiting", func() bool { return h.counter("in-flight") == clients })
	close(release)
	released = true
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if fetches != 1 {
		t.Errorf("%d upstream fetches, want 1", fetches)
	}
}
