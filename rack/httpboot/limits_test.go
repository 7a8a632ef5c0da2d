package httpboot

import (
	"bufio"
	"errors"
	"github.com/ironflow/ironflow/internal/testutil"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/rack/regionlink/regionlinktest"
)

// dial opens a raw connection to the test rack.
func dial(t *testing.T, rack *testRack) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(rack.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedWithin reads c until the server closes it, and fails if that takes longer than d.
func closedWithin(t *testing.T, c net.Conn, d time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the server kept the connection open for %s", d)
	}
}

func TestIdleKeepAliveConnectionIsClosed(t *testing.T) {
	rack := startRackWithLimits(t, Limits{IdleTimeout: 200 * time.Millisecond}, machines{}, regionlinktest.Start(t, "a").URL)
	c := dial(t, rack)
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: rack\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("healthz: %d, close %v", resp.StatusCode, resp.Close)
	}
	closedWithin(t, c, 5*time.Second) // idle after one request
}

func TestSlowBodyIsCutOff(t *testing.T) {
	rack := startRackWithLimits(t, Limits{ReadTimeout: 300 * time.Millisecond}, machines{}, regionlinktest.Start(t, "a").URL)
	c := dial(t, rack)
	// One byte of a 100-byte body, then nothing, to a route that reads bodies (the proxy).
	if _, err := io.WriteString(c, "POST /api/v1/agent/x/checkin HTTP/1.1\r\nHost: rack\r\nContent-Length: 100\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	closedWithin(t, c, 5*time.Second)
}

func TestConnectionCap(t *testing.T) {
	rack := startRackWithLimits(t, Limits{MaxConns: 2}, machines{}, regionlinktest.Start(t, "a").URL)
	// Two connections that send nothing hold both slots.
	first := dial(t, rack)
	dial(t, rack)
	hc := &http.Client{Timeout: 500 * time.Millisecond, Transport: &http.Transport{DisableKeepAlives: true}}
	if resp, err := hc.Get(rack.url + "/healthz"); err == nil {
		resp.Body.Close()
		t.Fatalf("a third connection was served (%d) with a cap of 2", resp.StatusCode)
	}
	first.Close()
	testutil.Eventually(t, 10*time.Second, "a request served once a slot is free", func() bool {
		resp, err := hc.Get(rack.url + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// TestLargeAssetOutlastsTheWriteTimeout: a boot image that takes longer to send than the
// server's WriteTimeout is still sent whole, within the time its size allows.
func TestLargeAssetOutlastsTheWriteTimeout(t *testing.T) {
	rack := startRackWithLimits(t, Limits{WriteTimeout: 50 * time.Millisecond, AssetWriteBase: 10 * time.Second}, machines{}, regionlinktest.Start(t, "a").URL)
	data := rack.writeFile(t, "images/initrd.img", 16<<20)
	resp, err := http.Get(rack.url + "/boot/images/initrd.img")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, slowReader{resp.Body})
	if err != nil || n != int64(len(data)) {
		t.Fatalf("downloaded %d of %d bytes: %v", n, len(data), err)
	}
}

// slowReader reads in small steps with pauses, as a slow link would.
type slowReader struct{ r io.Reader }

func (s slowReader) Read(p []byte) (int, error) {
	time.Sleep(time.Millisecond)
	return s.r.Read(p[:min(len(p), 64<<10)])
}

// clientFrom is an HTTP client whose connections come from the loopback address src, a
// client of its own to the rack.
func clientFrom(src string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

// Enlistment reports over one client's budget, or over the rack's for all clients, are
// answered 503 with Retry-After and never reach the region; /metrics counts them by limit.
func TestEnlistReportsAreLimitedPerClientAndPerRack(t *testing.T) {
	rack := startRackWithConfig(t, func(c *Config) {
		c.Enlist = EnlistLimits{PerClient: 0.001, PerClientBurst: 2, PerRack: 0.001, PerRackBurst: 3}
	}, machines{}, regionlinktest.Start(t, "a").URL)
	ipxe := func(c *http.Client, mac string) *http.Response {
		resp, err := c.Get(rack.url + "/ipxe/enlist?mac=" + mac)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	limited := func(resp *http.Response, what string) {
		t.Helper()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("%s: %s, Retry-After %q; want 503 with Retry-After", what, resp.Status, resp.Header.Get("Retry-After"))
		}
	}
	one, two := clientFrom("127.0.0.1"), clientFrom("127.0.0.2")
	for i, mac := range []string{"52-54-00-00-00-01", "52-54-00-00-00-02"} {
		if resp := ipxe(one, mac); resp.StatusCode != http.StatusOK {
			t.Fatalf("report %d of the first client: %s", i, resp.Status)
		}
	}
	limited(ipxe(one, "52-54-00-00-00-03"), "the first client's third report")
	if resp := ipxe(two, "52-54-00-00-00-04"); resp.StatusCode != http.StatusOK {
		t.Fatalf("the second client's first report: %s", resp.Status)
	}
	resp, err := two.Post(rack.url+"/api/v1/enlist", "application/json",
		strings.NewReader(`{"Inventory": {"Interfaces": [{"Name": "eth0", "MAC": "52:54:00:00:00:05"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	limited(resp, "the fourth report of the rack (an agent's)")

	rack.enlister.mu.Lock()
	defer rack.enlister.mu.Unlock()
	if n := len(rack.enlister.reports); n != 3 {
		t.Fatalf("%d reports reached the region, want 3", n)
	}
	_, body := get(t, rack.url+"/metrics")
	for _, want := range []string{`ironflow_httpboot_enlist_limited_total{limit="client"} 1`, `ironflow_httpboot_enlist_limited_total{limit="rack"} 1`,
		`ironflow_httpboot_enlist_reports_total{result="limited"} 2`} {
		if !contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
