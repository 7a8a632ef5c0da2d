// Package dns is the rack's DNS server for the machines it serves: names in the region's
// zones are answered by the region (through the region link, with its failover), every
// other name by the region's upstream resolvers, and answers are cached by their TTLs. With
// no source reachable it answers from the cache, stale, for a bounded time.
package dns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	mdns "github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/netutil"
	"golang.org/x/time/rate"

	regiondns "github.com/ironflow/ironflow/region/dns"
)

// Defaults of Config.
const (
	DefaultCacheSize = 10000
	DefaultMaxStale  = time.Hour
	DefaultTimeout   = 2 * time.Second
	// A client's queries per second on average and at once: a booting machine's bursts of
	// lookups fit, a flood from one address is dropped before it costs a lookup.
	DefaultRatePerClient  = 100
	DefaultBurstPerClient = 200
	DefaultMaxClients     = 8192        // client buckets kept (a few hundred bytes each)
	DefaultMaxInFlight    = RegionConns // lookups at the region and upstreams at once
	DefaultMaxTCPConns    = 256
)

// maxQuery is the largest query accepted: a query is one question (and an OPT record); the
// DNS flag day's EDNS buffer size is generous for that.
const maxQuery = 1232

// Config configures a Server.
type Config struct {
	Region    RegionExchanger // answers the region's zones (Region over the region link)
	CacheSize int             // answers kept (default DefaultCacheSize)
	MaxStale  time.Duration   // how long past its expiry an answer may still be served with every source down (default DefaultMaxStale)
	Timeout   time.Duration   // one attempt at an upstream resolver, and at the region (default DefaultTimeout)
	// Every client's budget (per source address; loopback and outsiders included) and how
	// many clients have their own (defaults DefaultRatePerClient, DefaultBurstPerClient,
	// DefaultMaxClients). A query over the budget is dropped unread.
	RatePerClient  rate.Limit
	BurstPerClient int
	MaxClients     int
	// MaxInFlight bounds the lookups at the region and the upstreams at once (default
	// DefaultMaxInFlight): a query that would need one more is answered from the stale cache
	// or SERVFAIL at once, so a flood of cache misses holds neither goroutines nor the CPU
	// the rack's DHCP needs.
	MaxInFlight int
	MaxTCPConns int // TCP connections served at once (default DefaultMaxTCPConns)
	Registry    prometheus.Registerer
	Logger      *slog.Logger
}

// Settings are what the region's config says; Configure replaces them at once.
type Settings struct {
	Zones     []string         // the region's zones (fully qualified)
	Upstreams []netip.AddrPort // resolvers for every other name
	Serial    uint32           // the region zones' serial: cached answers of another serial are stale
	Region    string           // the region's UUID: cached answers of another region's zones are not used
	Served    []netip.Prefix   // the rack's clients, the only ones answered (and loopback)
}

// Server is the rack's DNS server. Handle is the pure part; Serve feeds it from sockets.
type Server struct {
	cfg      Config
	log      *slog.Logger
	cache    *cache
	metrics  *metrics
	settings atomic.Pointer[Settings]
	limits   *clientLimits
	inFlight chan struct{} // a slot per lookup at the region or an upstream
	now      func() time.Time
}

// New builds a server; it answers nothing but REFUSED until Configure.
func New(cfg Config) (*Server, error) {
	if cfg.Region == nil {
		return nil, errors.New("rack DNS: no region to ask")
	}
	positiveOr(&cfg.CacheSize, DefaultCacheSize)
	positiveOr(&cfg.MaxStale, DefaultMaxStale)
	positiveOr(&cfg.Timeout, DefaultTimeout)
	positiveOr(&cfg.RatePerClient, DefaultRatePerClient)
	positiveOr(&cfg.BurstPerClient, DefaultBurstPerClient)
	positiveOr(&cfg.MaxClients, DefaultMaxClients)
	positiveOr(&cfg.MaxInFlight, DefaultMaxInFlight)
	positiveOr(&cfg.MaxTCPConns, DefaultMaxTCPConns)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{cfg: cfg, log: cfg.Logger, cache: newCache(cfg.CacheSize), now: time.Now,
		limits:   newClientLimits(cfg.RatePerClient, cfg.BurstPerClient, cfg.MaxClients),
		inFlight: make(chan struct{}, cfg.MaxInFlight)}
	var err error
	if s.metrics, err = newMetrics(cfg.Registry, func() float64 { return float64(s.cache.len()) }); err != nil {
		return nil, err
	}
	s.settings.Store(&Settings{})
	return s, nil
}

// positiveOr sets *v to def unless it is positive (a Config field left zero).
func positiveOr[T int | time.Duration | rate.Limit](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Configure installs the region's settings; zone names are canonicalised.
func (s *Server) Configure(st Settings) {
	zones := make([]string, len(st.Zones))
	for i, z := range st.Zones {
		zones[i] = mdns.CanonicalName(z)
	}
	st.Zones = zones
	s.settings.Store(&st)
}

// Handle answers req from a client at src; tcp says whether it came over TCP (zone
// transfers need it). Only the rack's clients (its served subnets, and loopback) get
// answers: to anyone else the rack would be an amplifier of the region's data. It never
// returns nil.
func (s *Server) Handle(ctx context.Context, req *mdns.Msg, src netip.Addr, tcp bool) *mdns.Msg {
	st := s.settings.Load()
	switch {
	case req.Opcode != mdns.OpcodeQuery:
		return s.refuse(req, mdns.RcodeNotImplemented, refusedOpcode)
	case len(req.Question) != 1:
		return s.refuse(req, mdns.RcodeFormatError, formerrMalformed)
	case req.Len() > maxQuery:
		return s.refuse(req, mdns.RcodeFormatError, formerrOversized)
	case !regiondns.ValidQueryName(req.Question[0].Name):
		return s.refuse(req, mdns.RcodeFormatError, formerrBadName)
	case req.Question[0].Qclass != mdns.ClassINET:
		return s.refuse(req, mdns.RcodeRefused, refusedClass)
	}
	if !st.client(src) {
		return s.refuse(req, mdns.RcodeRefused, refusedNotServed)
	}
	q := req.Question[0]
	ours := st.inZones(q.Name)
	switch {
	case q.Qtype == mdns.TypeAXFR || q.Qtype == mdns.TypeIXFR:
		if !tcp || !ours {
			return s.refuse(req, mdns.RcodeRefused, refusedTransfer)
		}
		return s.transfer(ctx, req)
	case !ours && len(st.Upstreams) == 0:
		return s.refuse(req, mdns.RcodeRefused, refusedNoUpstream)
	}
	m := s.resolve(ctx, req, q, st, ours)
	m.RecursionAvailable = true
	return m
}

// errBusy is a lookup not started: MaxInFlight lookups are under way.
var errBusy = errors.New("too many DNS lookups in flight")

// lookup asks the region (ours) or the upstreams in one of the MaxInFlight slots, or fails
// at once with errBusy when none is free.
func (s *Server) lookup(ctx context.Context, q *mdns.Msg, st *Settings, ours bool) (*mdns.Msg, error) {
	select {
	case s.inFlight <- struct{}{}:
		defer func() { <-s.inFlight }()
	default:
		s.metrics.busy.Inc()
		return nil, errBusy
	}
	actx, cancel := context.WithTimeout(ctx, 2*s.cfg.Timeout)
	defer cancel()
	if ours {
		return s.cfg.Region.Exchange(actx, q, st.Serial)
	}
	return upstreams{addrs: st.Upstreams, timeout: s.cfg.Timeout}.exchange(actx, q)
}

// resolve answers from the cache, else from the region or the upstreams, else stale.
func (s *Server) resolve(ctx context.Context, req *mdns.Msg, q mdns.Question, st *Settings, ours bool) *mdns.Msg {
	k := keyOf(q)
	now := s.now()
	cached, found := s.cache.get(k)
	if found && !cached.from(st, ours) {
		// A transfer moved the rack to another region, or the name into or out of the
		// region's zones: the answer is not what the one now asked would say, even stale.
		s.cache.drop(k)
		found = false
	}
	if found && now.Before(cached.expires) && (!ours || cached.serial == st.Serial) {
		s.metrics.answers.WithLabelValues(fromCache).Inc()
		return cached.reply(req, now, false)
	}
	fwd := new(mdns.Msg)
	fwd.SetQuestion(q.Name, q.Qtype)
	source := fromRegion
	if !ours {
		source = fromUpstream
		fwd.RecursionDesired = true
		fwd.SetEdns0(mdns.DefaultMsgSize, false)
	}
	ans, err := s.lookup(ctx, fwd, st, ours)
	if err == nil && ans.Rcode != mdns.RcodeServerFailure {
		ans.Extra = stripOPT(ans.Extra)
		if ttl := cacheTTL(ans); ttl > 0 {
			e := &entry{key: k, msg: ans, stored: now, expires: now.Add(ttl), fromRegion: ours}
			if ours {
				e.region, e.serial = st.Region, st.Serial
			}
			s.cache.put(e)
		}
		s.metrics.answers.WithLabelValues(source).Inc()
		e := entry{msg: ans, stored: now}
		return e.reply(req, now, false)
	}
	if err == nil {
		err = fmt.Errorf("%s answered SERVFAIL", source)
	}
	if found && now.Before(cached.expires.Add(s.cfg.MaxStale)) {
		s.log.Debug("serving a stale DNS answer", "name", q.Name, "type", mdns.TypeToString[q.Qtype], "error", err)
		s.metrics.answers.WithLabelValues(fromStale).Inc()
		return cached.reply(req, now, true)
	}
	if found {
		s.cache.drop(k)
	}
	s.log.Warn("DNS query answered SERVFAIL", "name", q.Name, "type", mdns.TypeToString[q.Qtype], "error", err)
	s.metrics.servfail.Inc()
	return new(mdns.Msg).SetRcode(req, mdns.RcodeServerFailure)
}

// transfer passes a zone transfer of a region zone to the region; it is never cached.
func (s *Server) transfer(ctx context.Context, req *mdns.Msg) *mdns.Msg {
	fwd := new(mdns.Msg)
	fwd.SetQuestion(req.Question[0].Name, req.Question[0].Qtype)
	ans, err := s.lookup(ctx, fwd, s.settings.Load(), true)
	if err != nil {
		s.log.Warn("zone transfer answered SERVFAIL", "zone", req.Question[0].Name, "error", err)
		s.metrics.servfail.Inc()
		return new(mdns.Msg).SetRcode(req, mdns.RcodeServerFailure)
	}
	s.metrics.answers.WithLabelValues(fromRegion).Inc()
	e := entry{msg: ans, stored: s.now()}
	return e.reply(req, e.stored, false)
}

func (s *Server) refuse(req *mdns.Msg, rcode int, reason string) *mdns.Msg {
	s.metrics.refused.WithLabelValues(reason).Inc()
	m := new(mdns.Msg).SetRcode(req, rcode)
	if rcode == mdns.RcodeNotImplemented || rcode == mdns.RcodeFormatError {
		m.Question = nil // what could not be understood is not echoed
	}
	return m
}

func stripOPT(extra []mdns.RR) []mdns.RR {
	out := extra[:0]
	for _, rr := range extra {
		if rr.Header().Rrtype != mdns.TypeOPT {
			out = append(out, rr)
		}
	}
	return out
}

// inZones reports whether name is in one of the region's zones.
func (st *Settings) inZones(name string) bool {
	name = strings.ToLower(name)
	for _, z := range st.Zones {
		if mdns.IsSubDomain(z, name) {
			return true
		}
	}
	return false
}

// client reports whether a is one of the rack's clients: in a served subnet, or loopback.
func (st *Settings) client(a netip.Addr) bool {
	a = a.Unmap()
	if a.IsLoopback() {
		return true
	}
	for _, p := range st.Served {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// allow spends one query of the budget of the client at a: its own when it is a client,
// the one all outsiders share otherwise.
func (s *Server) allow(a netip.Addr) bool {
	now := s.now()
	var ok bool
	if s.settings.Load().client(a) {
		ok = s.limits.allow(a, now)
	} else {
		ok = s.limits.allowOutsider(now)
	}
	if ok {
		return true
	}
	s.metrics.rateLimited.Inc()
	return false
}

// ServeDNS implements mdns.Handler.
func (s *Server) ServeDNS(w mdns.ResponseWriter, req *mdns.Msg) {
	_, tcp := w.RemoteAddr().(*net.TCPAddr)
	src := addrOf(w.RemoteAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 4*s.cfg.Timeout)
	defer cancel()
	m := s.Handle(ctx, req, src, tcp)
	regiondns.FitReply(w, req, m)
	if err := w.WriteMsg(m); err != nil {
		s.log.Debug("DNS reply not sent", "error", err)
	}
}

func addrOf(a net.Addr) netip.Addr {
	var ip net.IP
	switch a := a.(type) {
	case *net.UDPAddr:
		ip = a.IP
	case *net.TCPAddr:
		ip = a.IP
	}
	addr, _ := netip.AddrFromSlice(ip)
	return addr.Unmap()
}

// errRateLimited ends the TCP connection of a client over its budget.
var errRateLimited = errors.New("DNS client over its query budget")

// limitedReader drops the queries over their client's budget as they are read, before they
// cost a goroutine or a parse; a TCP client over its budget loses its connection.
type limitedReader struct {
	mdns.Reader
	s *Server
}

func (r limitedReader) ReadUDP(conn *net.UDPConn, timeout time.Duration) ([]byte, *mdns.SessionUDP, error) {
	for {
		m, session, err := r.Reader.ReadUDP(conn, timeout)
		if err != nil || r.s.allow(addrOf(session.RemoteAddr())) {
			return m, session, err
		}
	}
}

func (r limitedReader) ReadTCP(conn net.Conn, timeout time.Duration) ([]byte, error) {
	m, err := r.Reader.ReadTCP(conn, timeout)
	if err == nil && !r.s.allow(addrOf(conn.RemoteAddr())) {
		return nil, errRateLimited
	}
	return m, err
}

// Listen opens the UDP socket and TCP listener of addr.
func Listen(addr string) (net.PacketConn, net.Listener, error) {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("DNS: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		pc.Close()
		return nil, nil, fmt.Errorf("DNS: %w", err)
	}
	return pc, ln, nil
}

// Serve answers on pc (a *net.UDPConn, as Listen opens) and ln until ctx ends, at most
// MaxTCPConns connections at once. Queries over their client's budget are dropped; messages
// too large or not parseable are answered FORMERR (or ignored when even the header is
// unreadable) and counted.
func (s *Server) Serve(ctx context.Context, pc net.PacketConn, ln net.Listener) error {
	return regiondns.Serve(ctx, s, pc, netutil.LimitListener(ln, s.cfg.MaxTCPConns), func(srv *mdns.Server) {
		srv.DecorateReader = func(r mdns.Reader) mdns.Reader { return limitedReader{Reader: r, s: s} }
		srv.UDPSize = 4096 // read oversized queries whole, so Handle refuses them with a count
		srv.MsgAcceptFunc = func(dh mdns.Header) mdns.MsgAcceptAction {
			action := mdns.DefaultMsgAcceptFunc(dh)
			switch action {
			case mdns.MsgReject:
				s.metrics.refused.WithLabelValues(formerrMalformed).Inc()
			case mdns.MsgRejectNotImplemented:
				s.metrics.refused.WithLabelValues(refusedOpcode).Inc()
			}
			return action
		}
		srv.MsgInvalidFunc = func([]byte, error) { s.metrics.refused.WithLabelValues(formerrMalformed).Inc() }
	})
}
