package integration

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// abuseBodyLimit is the region's limit on a request body (region/server/decode.go, maxBody).
const abuseBodyLimit = 1 << 20

// abuseBodyExceptions are the routes that take a body and do not refuse one above
// abuseBodyLimit with 413, with the status they answer a caller allowed to call them, and why.
var abuseBodyExceptions = map[string]int{
	// The migrate ticket in its header is checked before the bundle (up to 256 MiB) is read.
	"POST /api/v1/machines/import": 401,
	// A rack bundle may hold 64 MiB (maxRackBundle); above the common limit it is parsed.
	"POST /api/v1/racks/import/check": 400,
	"POST /api/v1/racks/import":       400,
	// Refused before its body is read to every caller but the move.
	"POST /api/v1/racks/{uuid}/operations/release": 403,
	// They read no body: what they act on is in the path.
	"POST /api/v1/racks/{uuid}/unpause":             404,
	"POST /api/v1/racks/{uuid}/hand-over":           404,
	"POST /api/v1/machines/{key}/unquiesce":         404,
	"POST /api/v1/machines/{key}/restore-migration": 404,
	"POST /api/v1/machines/{key}/activate":          404,
	// Sent as JSON, it is refused by its content type before its body (a DNS message) is read.
	"POST /api/v1/dns-query": 415,
	// An image's bytes are bounded by the region's image limit (--images-max-size), not by
	// the body limit; sent as JSON, the upload is refused by its content type first.
	"PUT /api/v1/images/{name}": 415,
}

// abuseLimits checks the region's limits: bodies above the limit, slow clients, large
// headers.
func abuseLimits(t *testing.T, s *abuseStack) {
	t.Run("bodies above the limit are refused with 413", func(t *testing.T) {
		big := bytes.Repeat([]byte(" "), abuseBodyLimit+1)
		rows := abuseRouteRows()
		for _, rt := range s.srv.Routes() {
			method, _, _ := strings.Cut(rt.Pattern, " ")
			if method == "GET" || method == "DELETE" {
				continue
			}
			want, excepted := abuseBodyExceptions[rt.Pattern]
			if !excepted {
				want = 413
			}
			who, ok := allowedCaller(rows[rt.Pattern])
			if !ok && !excepted {
				t.Errorf("%s: no principal may call it", rt.Pattern)
				continue
			}
			if !ok {
				who = admin // the highest role that is still refused
			}
			method, path := s.fillRoute(rt)
			if a := s.call(t, who, method, path, big); a.code != want {
				t.Errorf("%s %s as %s with %d bytes: %d, want %d: %.200s", method, path, who, len(big), a.code, want, a.body)
			}
		}
	})
	t.Run("a client that does not finish its request is cut off", func(t *testing.T) {
		for name, partial := range map[string]string{
			"headers": "POST /api/v1/machines HTTP/1.1\r\nHost: region\r\nAuthorization: Bearer " + s.tokens[admin] + "\r\n",
			"body":    "POST /api/v1/machines HTTP/1.1\r\nHost: region\r\nContent-Length: 100\r\nAuthorization: Bearer " + s.tokens[admin] + "\r\n\r\n{\"Name\":",
		} {
			t.Run(name, func(t *testing.T) {
				assertCutOff(t, strings.TrimPrefix(s.url, "http://"), partial, abuseSlowClientTimeout)
			})
		}
	})
	t.Run("headers above the limit are refused with 431", func(t *testing.T) {
		req, err := http.NewRequest("GET", s.url+"/api/v1/info", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Padding", strings.Repeat("a", 128<<10))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("128 KiB of headers: %d", resp.StatusCode)
		}
	})
}

// allowedCaller is the first principal of row that may call its route, preferring the
// route's own credential (agent, rack, rack secret) over the admin's.
func allowedCaller(row string) (principal, bool) {
	marks := strings.Fields(row)
	for _, p := range []principal{ownAgent, rackSecret, ownRack, admin, anonymous} {
		if p < principal(len(marks)) && marks[p] == "." {
			return p, true
		}
	}
	return 0, false
}

// assertCutOff sends partial to addr and waits for the server to close the connection,
// which it must do about timeout after the request began; it fails after eight times that.
func assertCutOff(t *testing.T, addr, partial string, timeout time.Duration) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, partial); err != nil {
		t.Fatal(err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(8 * timeout)); err != nil {
		t.Fatal(err)
	}
	// The server may answer 408 before it closes; what matters is that it closes.
	_, err = io.Copy(io.Discard, bufio.NewReader(conn))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the connection is still open %s after a partial request", 8*timeout)
	}
}
