// Package syslog is the rack's syslog receiver: RFC 3164 and RFC 5424 messages over UDP and
// TCP (octet-counted or newline-framed, RFC 6587) from the machines the rack serves, each
// attributed to the MAC of its source address by the rack's leases and reservations, then
// buffered (bounded) and posted to the region in batches. It shares nothing with DHCP but a
// short lookup in the lease table, and it never waits on the region.
package syslog

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"

	"github.com/ironflow/ironflow/internal/backoff"
	"github.com/ironflow/ironflow/internal/syslogmsg"
	"github.com/ironflow/ironflow/region/api"
)

// DefaultAddr is where a rack receives syslog, on UDP and TCP.
const DefaultAddr = ":514"

// Attributor names the MAC of the client that holds an address (an active lease or a
// reservation of the rack), or reports that none does.
type Attributor func(netip.Addr) (net.HardwareAddr, bool)

// Config configures a Server. Zero limits take the defaults noted.
type Config struct {
	Addr              string // UDP and TCP listen address, e.g. ":514"
	Attribute         Attributor
	Forwarder         *Forwarder
	Metrics           *Metrics
	MaxConns          int // TCP connections at once (default 256)
	MaxConnsPerClient int // TCP connections of one source address at once (default 4)
	// TCP connections at once from addresses no client of the rack holds (default 16, at most
	// MaxConns). Their messages are dropped anyway; the budget only keeps them from taking the
	// slots of the clients the rack serves, which also take the slot of the longest-silent of
	// them when every slot is held.
	MaxUnattributedConns int
	IdleTimeout          time.Duration // a TCP connection silent this long is closed (default 2m)
	// Messages one client (source address) may send per second on average, and at once: a
	// booting kernel's burst fits, a flood from one machine cannot crowd out the others
	// (defaults 200 and 2,000).
	RatePerClient  rate.Limit
	BurstPerClient int
	Now            func() time.Time
	Logger         *slog.Logger
}

// Server receives syslog on one UDP socket and one TCP listener.
type Server struct {
	cfg Config
	log *slog.Logger
	udp *net.UDPConn
	tcp *net.TCPListener

	mu           sync.Mutex
	closed       bool // Serve is ending: no more connections
	conns        map[net.Conn]*tcpClient
	perClient    map[netip.Addr]int
	unattributed int // connections in conns whose source was unattributed when last checked

	dropLog       rate.Sometimes // the debug line of dropped messages, at most once every dropLogInterval
	unloggedDrops atomic.Int64   // messages dropped since that line

	limitsMu  sync.Mutex
	limits    map[netip.Addr]*clientLimit // attributed clients only: bounded by the rack's leases and reservations
	lastSweep time.Time
	limitIdle time.Duration // longer than an empty budget takes to refill, so forgetting one never grants more
}

// tcpClient is what admission knows of one open TCP connection.
type tcpClient struct {
	src          netip.Addr
	attributed   bool         // the source had a client of the rack when last checked (under Server.mu)
	lastReceived atomic.Int64 // Unix nanoseconds of the last frame (or of the accept)
}

// clientLimit is one client's message budget.
type clientLimit struct {
	*rate.Limiter
	lastSeen time.Time
}

// New opens the UDP socket and the TCP listener (on the same port when Addr's port is 0, as
// far as the system allows: the TCP port is taken from the UDP socket's).
func New(cfg Config) (*Server, error) {
	if cfg.Attribute == nil || cfg.Forwarder == nil || cfg.Metrics == nil {
		return nil, errors.New("syslog: an attributor, a forwarder and metrics are required")
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 256
	}
	if cfg.MaxConnsPerClient <= 0 {
		cfg.MaxConnsPerClient = 4
	}
	if cfg.MaxUnattributedConns <= 0 {
		cfg.MaxUnattributedConns = 16
	}
	cfg.MaxUnattributedConns = min(cfg.MaxUnattributedConns, cfg.MaxConns)
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 2 * time.Minute
	}
	if cfg.RatePerClient <= 0 {
		cfg.RatePerClient = 200
	}
	if cfg.BurstPerClient <= 0 {
		cfg.BurstPerClient = 2000
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{cfg: cfg, log: cfg.Logger, dropLog: rate.Sometimes{Interval: dropLogInterval}, conns: map[net.Conn]*tcpClient{}, perClient: map[netip.Addr]int{},
		limits: map[netip.Addr]*clientLimit{}, limitIdle: time.Minute + time.Duration(float64(cfg.BurstPerClient)/float64(cfg.RatePerClient)*float64(time.Second))}
	ua, err := net.ResolveUDPAddr("udp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("syslog listen address %q: %w", cfg.Addr, err)
	}
	// A port the system picked for UDP may already be someone's TCP port; pick again then.
	attempts := 1
	if ua.Port == 0 {
		attempts = 20
	}
	for try := 1; ; try++ {
		if s.udp, err = net.ListenUDP("udp", ua); err != nil {
			return nil, fmt.Errorf("syslog UDP: %w", err)
		}
		ta := &net.TCPAddr{IP: ua.IP, Port: s.udp.LocalAddr().(*net.UDPAddr).Port, Zone: ua.Zone}
		if s.tcp, err = net.ListenTCP("tcp", ta); err == nil {
			return s, nil
		}
		s.udp.Close()
		if try == attempts || !errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("syslog TCP: %w", err)
		}
	}
}

// Addr is the address the server listens on (UDP and TCP).
func (s *Server) Addr() netip.AddrPort { return s.udp.LocalAddr().(*net.UDPAddr).AddrPort() }

// Close closes the sockets of a server that may never have served.
func (s *Server) Close() error {
	return errors.Join(ignoreClosed(s.udp.Close()), ignoreClosed(s.tcp.Close()))
}

func ignoreClosed(err error) error {
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Serve receives until ctx ends, then closes the sockets and every connection.
func (s *Server) Serve(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		<-ctx.Done()
		s.udp.Close()
		s.tcp.Close()
		s.mu.Lock()
		s.closed = true
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		return nil
	})
	g.Go(func() error { s.serveUDP(ctx); return nil })
	g.Go(func() error { s.serveTCP(ctx, g); return nil })
	return g.Wait()
}

func (s *Server) serveUDP(ctx context.Context) {
	buf := make([]byte, 64<<10)
	for {
		n, from, err := s.udp.ReadFromUDPAddrPort(buf)
		if err != nil {
			if s.pause(ctx, "UDP read", err) != nil {
				return
			}
			continue
		}
		s.receive(from.Addr(), "udp", buf[:n])
	}
}

func (s *Server) serveTCP(ctx context.Context, g *errgroup.Group) {
	for {
		c, err := s.tcp.AcceptTCP()
		if err != nil {
			if s.pause(ctx, "TCP accept", err) != nil {
				return
			}
			continue
		}
		src := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
		tc := &tcpClient{src: src}
		_, tc.attributed = s.cfg.Attribute(src)
		tc.lastReceived.Store(time.Now().UnixNano())
		if limit := s.admit(c, tc); limit != "" {
			s.cfg.Metrics.refused.WithLabelValues(limit).Inc()
			c.Close()
			continue
		}
		g.Go(func() error {
			defer s.release(c)
			s.serveConn(c, tc)
			return nil
		})
	}
}

// errorPause is how long the receiver waits after a socket error before it reads again.
const errorPause = 100 * time.Millisecond

// dropLogInterval is the least time between two debug lines of dropped messages.
const dropLogInterval = time.Second

// pause handles a socket error: at shutdown (ctx over or the socket closed) it returns an
// error to end the loop; otherwise (out of file descriptors, a transient network error) it
// logs and waits a moment, so that a syslog failure never ends the rack and its DHCP.
func (s *Server) pause(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
		return net.ErrClosed
	}
	s.log.Warn("syslog "+op+" failed; going on", "error", err)
	return backoff.Sleep(ctx, errorPause)
}

// admit counts c in, or names the limit that refuses it. A source no client of the rack holds
// gets at most MaxUnattributedConns of the slots; a client of the rack finding every slot held
// takes the slot of the longest-silent unattributed connection, so that addresses the rack
// serves nobody on cannot keep its machines' logs out.
func (s *Server) admit(c net.Conn, tc *tcpClient) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return RefuseTotal
	case s.perClient[tc.src] >= s.cfg.MaxConnsPerClient:
		return RefusePerClient
	case !tc.attributed && s.unattributed >= s.cfg.MaxUnattributedConns:
		return RefuseUnattributed
	case len(s.conns) >= s.cfg.MaxConns && (!tc.attributed || !s.evictUnattributed()):
		return RefuseTotal
	}
	s.conns[c] = tc
	s.perClient[tc.src]++
	if !tc.attributed {
		s.unattributed++
	}
	return ""
}

// evictUnattributed closes the unattributed connection silent the longest and frees its slot,
// or reports that there is none. A connection whose source has become a client of the rack
// since (a lease granted after it connected) is counted as attributed instead. s.mu is held.
func (s *Server) evictUnattributed() bool {
	var victim net.Conn
	var oldest int64
	for c, tc := range s.conns {
		if tc.attributed {
			continue
		}
		if _, tc.attributed = s.cfg.Attribute(tc.src); tc.attributed {
			s.unattributed--
			continue
		}
		if t := tc.lastReceived.Load(); victim == nil || t < oldest {
			victim, oldest = c, t
		}
	}
	if victim == nil {
		return false
	}
	victim.Close()
	s.forget(victim)
	s.cfg.Metrics.evicted.Inc()
	return true
}

// release closes c and frees its slot, unless evictUnattributed has already.
func (s *Server) release(c net.Conn) {
	c.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forget(c)
}

// forget frees the slot of c, when it holds one. s.mu is held.
func (s *Server) forget(c net.Conn) {
	tc, ok := s.conns[c]
	if !ok {
		return
	}
	delete(s.conns, c)
	if !tc.attributed {
		s.unattributed--
	}
	if s.perClient[tc.src]--; s.perClient[tc.src] <= 0 {
		delete(s.perClient, tc.src)
	}
}

// serveConn reads messages until the client closes, stays idle too long or sends a frame that
// cannot be resynchronised.
func (s *Server) serveConn(c net.Conn, tc *tcpClient) {
	src := tc.src
	r := bufio.NewReaderSize(c, syslogmsg.MaxLine+2)
	for {
		if err := c.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout)); err != nil {
			return
		}
		frame, err := readFrame(r, syslogmsg.MaxLine)
		tc.lastReceived.Store(time.Now().UnixNano())
		switch {
		case errors.Is(err, errTooLong):
			s.cfg.Metrics.received.WithLabelValues("tcp").Inc()
			s.drop(DropTooLong, src)
			continue
		case errors.Is(err, errBadFrame):
			s.cfg.Metrics.received.WithLabelValues("tcp").Inc()
			s.drop(DropTooLong, src)
			s.log.Debug("syslog connection closed", "client", src, "error", err)
			return
		case err != nil:
			return // EOF, idle timeout, closed at shutdown
		}
		s.receive(src, "tcp", frame)
	}
}

// receive parses, attributes and queues one message; what cannot be delivered is counted.
func (s *Server) receive(src netip.Addr, transport string, raw []byte) {
	for len(raw) > 0 && (raw[len(raw)-1] == '\n' || raw[len(raw)-1] == '\r' || raw[len(raw)-1] == 0) {
		raw = raw[:len(raw)-1]
	}
	if len(raw) == 0 {
		return // keep-alive newlines
	}
	s.cfg.Metrics.received.WithLabelValues(transport).Inc()
	if len(raw) > syslogmsg.MaxLine {
		s.drop(DropTooLong, src)
		return
	}
	now := s.cfg.Now()
	msg, err := syslogmsg.Parse(raw, now)
	if err != nil {
		s.drop(DropMalformed, src)
		return
	}
	src = src.Unmap()
	mac, ok := s.cfg.Attribute(src)
	if !ok {
		s.drop(DropUnattributed, src)
		return
	}
	if !s.allow(src, now) {
		s.drop(DropRateLimited, src)
		return
	}
	s.cfg.Forwarder.Push(api.SyslogMessage{
		Addr: src.String(), MAC: mac.String(), Received: now.UTC(), Time: msg.Time,
		Facility: msg.Facility, Severity: msg.Severity, Hostname: msg.Hostname, App: msg.App,
		ProcID: msg.ProcID, MsgID: msg.MsgID, Text: msg.Text,
	})
}

// allow spends one message of src's budget. Budgets idle for limitIdle are forgotten: by then
// they have refilled, so a new one is the same.
func (s *Server) allow(src netip.Addr, now time.Time) bool {
	s.limitsMu.Lock()
	defer s.limitsMu.Unlock()
	if now.Sub(s.lastSweep) > s.limitIdle {
		for a, l := range s.limits {
			if now.Sub(l.lastSeen) > s.limitIdle {
				delete(s.limits, a)
			}
		}
		s.lastSweep = now
	}
	l := s.limits[src]
	if l == nil {
		l = &clientLimit{Limiter: rate.NewLimiter(s.cfg.RatePerClient, s.cfg.BurstPerClient)}
		s.limits[src] = l
	}
	l.lastSeen = now
	return l.AllowN(now, 1)
}

// drop counts a message that will not reach the region. It is logged at debug only, and at
// most once every dropLogInterval with the drops since the line before, since a flood of them
// must not become a flood of log lines (nor a log kept in memory grow by one line each).
func (s *Server) drop(reason string, src netip.Addr) {
	s.cfg.Metrics.dropped.WithLabelValues(reason).Inc()
	if !s.log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	s.unloggedDrops.Add(1)
	s.dropLog.Do(func() {
		s.log.Debug("syslog message dropped", "reason", reason, "client", src, "dropped_since_last_line", s.unloggedDrops.Swap(0))
	})
}
