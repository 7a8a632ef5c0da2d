package server_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/server"
)

// TestHTTPLimits: with short limits, a slow body and an idle keep-alive connection are cut
// off, connections beyond MaxConns wait, and an agent's long poll outlives the timeouts.
func TestHTTPLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const timeout = time.Second
	base := startServer(t, e.st, "limited", func(c *server.Config) {
		c.Limits = server.Limits{ReadTimeout: timeout, WriteTimeout: timeout, IdleTimeout: timeout, MaxConns: 2}
	})
	addr := strings.TrimPrefix(base, "http://")
	dial := func(t *testing.T) net.Conn {
		t.Helper()
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	// closedWithin reads conn until the region closes it (or resets it, with unread data),
	// which must happen within limit.
	closedWithin := func(t *testing.T, conn net.Conn, limit time.Duration) {
		t.Helper()
		conn.SetReadDeadline(time.Now().Add(limit))
		var timeout net.Error
		if _, err := io.Copy(io.Discard, conn); errors.As(err, &timeout) && timeout.Timeout() {
			t.Fatalf("connection still open after %s: %v", limit, err)
		}
	}

	t.Run("slow body", func(t *testing.T) {
		conn := dial(t)
		fmt.Fprintf(conn, "POST /api/v1/machines HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", e.tokens[api.RoleAdmin])
		stop := make(chan struct{})
		defer close(stop)
		go func() { // one byte every 200 ms, as a slowloris would
			for {
				select {
				case <-stop:
					return
				case <-time.After(200 * time.Millisecond):
					if _, err := conn.Write([]byte(" ")); err != nil {
						return
					}
				}
			}
		}()
		start := time.Now()
		closedWithin(t, conn, 10*timeout)
		if elapsed := time.Since(start); elapsed < timeout/2 {
			t.Errorf("closed after %s, before the read timeout", elapsed)
		}
	})

	t.Run("idle keep-alive", func(t *testing.T) {
		conn := dial(t)
		fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Close {
			t.Fatalf("healthz: %d, close %v", resp.StatusCode, resp.Close)
		}
		closedWithin(t, conn, 10*timeout)
	})

	t.Run("connection cap", func(t *testing.T) {
		// Two silent connections take both slots until the header timeout frees them.
		dial(t)
		dial(t)
		start := time.Now()
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if elapsed := time.Since(start); resp.StatusCode != http.StatusOK || elapsed < timeout/2 {
			t.Errorf("third connection answered %d after %s, want it to wait for a slot", resp.StatusCode, elapsed)
		}
	})

	t.Run("long poll outlives the timeouts", func(t *testing.T) {
		id := e.create(api.KindMachines, api.Machine{Name: "poller", Secret: "poll-secret"})["Uuid"].(string)
		start := time.Now()
		r := doRequest(t, "machine:"+id+":poll-secret", http.MethodGet, fmt.Sprintf("%s/api/v1/agent/%s/next-job?wait=%s", base, id, 3*timeout), nil)
		if elapsed := time.Since(start); r.code != http.StatusNoContent || elapsed < 3*timeout {
			t.Errorf("long poll answered %d after %s, want 204 after the full wait", r.code, elapsed)
		}
	})
}
