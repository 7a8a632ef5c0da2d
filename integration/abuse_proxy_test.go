package integration

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/rack"
)

// abuseProxyHeaderTimeout is the rack proxy's ReadHeaderTimeout (rack/proxy, default).
const abuseProxyHeaderTimeout = 10 * time.Second

// proxyAsk sends a raw request to the rack's proxy at addr from the loopback address from
// and returns the answer's status and body.
func proxyAsk(t *testing.T, from netip.Addr, addr, raw string) (int, string) {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: from.AsSlice()}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%.60q: %v", raw, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(body)
}

func proxyGet(target string) string {
	u, err := url.Parse(target)
	if err != nil {
		panic(err)
	}
	return "GET " + target + " HTTP/1.1\r\nHost: " + u.Host + "\r\nConnection: close\r\n\r\n"
}

func proxyConnect(hostport string) string {
	return "CONNECT " + hostport + " HTTP/1.1\r\nHost: " + hostport + "\r\n\r\n"
}

// abuseProxy: the rack's HTTP proxy for machines refuses outsiders whatever they ask,
// carries nothing to the control plane (the region, the rack's own services), loopback or
// link-local for its own clients either, CONNECTs to allowed ports only, and cuts off
// oversized and unfinished headers.
func abuseProxy(t *testing.T, s *abuseStack, racks abuseRacks, l rack.Listener) {
	region := strings.TrimPrefix(s.url, "http://")
	t.Run("outsiders are refused whatever they ask", func(t *testing.T) {
		for _, raw := range []string{proxyGet("http://192.0.2.1/"), proxyConnect("192.0.2.1:443"), proxyGet(s.url + "/api/v1/info")} {
			if code, body := proxyAsk(t, abuseOutsider(), l.Addr, raw); code != http.StatusForbidden || !strings.Contains(body, "subnets") {
				t.Errorf("an outsider's %.40q: %d %q, want 403 for outsiders", raw, code, body)
			}
		}
	})
	t.Run("no request of a client reaches the control plane, loopback or link-local", func(t *testing.T) {
		for _, raw := range []string{
			proxyGet(s.url + "/api/v1/info"),              // the region
			proxyGet(racks.loopback.httpURL + "/metrics"), // the rack's own HTTP boot
			proxyGet("http://" + l.Addr + "/"),            // the proxy itself
			proxyGet("http://169.254.169.254/latest/meta-data/"),
			proxyGet("http://localhost:8080/"),
			proxyGet("http://[::1]:8080/"),
			proxyConnect(region),
			proxyConnect("169.254.169.254:443"),
		} {
			if code, body := proxyAsk(t, abuseClient(), l.Addr, raw); code != http.StatusForbidden || !strings.Contains(body, "does not") {
				t.Errorf("a client's %.60q: %d %q, want 403 for the target or its port", raw, code, body)
			}
		}
	})
	t.Run("CONNECT reaches the allowed ports only", func(t *testing.T) {
		for _, port := range []string{"22", "25", "5432", "5240"} {
			if code, body := proxyAsk(t, abuseClient(), l.Addr, proxyConnect("192.0.2.1:"+port)); code != http.StatusForbidden || !strings.Contains(body, "port") {
				t.Errorf("CONNECT to port %s: %d %q, want 403", port, code, body)
			}
		}
		if code, _ := proxyAsk(t, abuseClient(), l.Addr, proxyGet("http://192.0.2.1:22/")); code != http.StatusForbidden {
			t.Errorf("GET of a privileged port: %d, want 403", code)
		}
	})
	t.Run("only GET and HEAD of absolute http URLs, without a body", func(t *testing.T) {
		for raw, want := range map[string]int{
			"POST http://192.0.2.1/ HTTP/1.1\r\nHost: 192.0.2.1\r\nContent-Length: 2\r\n\r\n{}":   http.StatusMethodNotAllowed,
			"GET / HTTP/1.1\r\nHost: rack\r\n\r\n":                                                http.StatusBadRequest,
			"GET http://192.0.2.1/ HTTP/1.1\r\nHost: 192.0.2.1\r\nContent-Length: 5\r\n\r\nhello": http.StatusRequestEntityTooLarge,
		} {
			if code, _ := proxyAsk(t, abuseClient(), l.Addr, raw); code != want {
				t.Errorf("%.40q: %d, want %d", raw, code, want)
			}
		}
	})
	t.Run("headers above the limit are refused with 431", func(t *testing.T) {
		raw := "GET http://192.0.2.1/ HTTP/1.1\r\nHost: 192.0.2.1\r\nX-Padding: " + strings.Repeat("a", 128<<10) + "\r\n\r\n"
		if code, _ := proxyAsk(t, abuseClient(), l.Addr, raw); code != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("128 KiB of headers: %d, want 431", code)
		}
	})
	t.Run("a client that does not finish its headers is cut off", func(t *testing.T) {
		assertCutOff(t, l.Addr, "GET http://192.0.2.1/ HTTP/1.1\r\nHost: 192.0.2.1\r\n", abuseProxyHeaderTimeout)
	})
}
