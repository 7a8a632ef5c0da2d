package proxy

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// tunnel answers CONNECT: to an allowed port of an allowed address, directly or through
// the parent proxy, then copies bytes both ways until either side ends or the tunnel idles.
func (s *Server) tunnel(w http.ResponseWriter, r *http.Request, up *upstream) {
	host, portText, err := net.SplitHostPort(r.Host)
	port, perr := strconv.Atoi(portText)
	if err != nil || perr != nil {
		s.refuse(w, r, refusedRequest, http.StatusBadRequest, "CONNECT takes host:port")
		return
	}
	if !slices.Contains(up.ConnectPorts, port) {
		s.refuse(w, r, refusedPort, http.StatusForbidden, "the proxy does not CONNECT to that port")
		return
	}
	if err := s.cfg.Targets.check(r.Context(), host, up.Parent != nil); err != nil {
		s.targetFailed(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Limits.DialTimeout+s.cfg.Limits.UpstreamHeaderTimeout)
	defer cancel()
	remote, err := s.dialTunnel(ctx, up, r.Host)
	if err != nil {
		s.targetFailed(w, r, err)
		return
	}
	defer remote.Close()
	client, buffered, err := http.NewResponseController(w).Hijack()
	if err != nil {
		s.log.Warn("proxy cannot take over a CONNECT connection", "remote", r.RemoteAddr, "error", err)
		return
	}
	defer client.Close()
	s.m.requests.WithLabelValues(resultTunnel).Inc()
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	idle := s.cfg.Limits.TunnelIdle
	done := make(chan int64, 2)
	// What the client sent after its CONNECT and the server read already comes first.
	early := io.LimitReader(buffered, int64(buffered.Reader.Buffered()))
	go func() { done <- pipe(stallConn{remote, idle}, io.MultiReader(early, stallConn{client, idle})) }()
	go func() { done <- pipe(stallConn{client, idle}, stallConn{remote, idle}) }()
	n := <-done
	// One side ended: end the other, whose copy then returns.
	client.Close()
	remote.Close()
	n += <-done
	s.m.bytes.WithLabelValues("upstream").Add(float64(n))
}

func pipe(dst io.Writer, src io.Reader) int64 {
	n, _ := io.Copy(dst, src)
	return n
}

// dialTunnel connects to addr for a tunnel: directly, checking the address connected to, or
// through the parent proxy's own CONNECT.
func (s *Server) dialTunnel(ctx context.Context, up *upstream, addr string) (net.Conn, error) {
	if up.Parent == nil {
		return s.cfg.Targets.dialer(s.cfg.Limits.DialTimeout).DialContext(ctx, "tcp", addr)
	}
	parentAddr := up.Parent.Host
	if up.Parent.Port() == "" {
		parentAddr = net.JoinHostPort(up.Parent.Hostname(), "80")
	}
	c, err := (&net.Dialer{Timeout: s.cfg.Limits.DialTimeout}).DialContext(ctx, "tcp", parentAddr)
	if err != nil {
		return nil, err
	}
	if d, ok := ctx.Deadline(); ok {
		c.SetDeadline(d)
	}
	req := "CONNECT " + addr + " HTTP/1.1\r\nHost: " + addr + "\r\n"
	if u := up.Parent.User; u != nil {
		pw, _ := u.Password()
		req += "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(u.Username()+":"+pw)) + "\r\n"
	}
	br := bufio.NewReader(c)
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		c.Close()
		return nil, err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("parent proxy CONNECT: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		c.Close()
		return nil, fmt.Errorf("parent proxy CONNECT: %s", resp.Status)
	}
	c.SetDeadline(time.Time{})
	return bufferedConn{c, br}, nil
}

// bufferedConn reads what its reader buffered before the connection.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
