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

	regiondns "github.com/ironflow/ironflow/region/dns"
)

// Defaults of Config.
const (
	DefaultCacheSize = 10000
	DefaultMaxStale  = time.Hour
	DefaultTimeout   = 2 * time.Second
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
	Registry  prometheus.Registerer
	Logger    *slog.Logger
}

// Settings are what the region's config says; Configure replaces them at once.
type Settings struct {
	Zones     []string         // the region's zones (fully qualified)
	Upstreams []netip.AddrPort // resolvers for every other name
	Serial    uint32           // the region zones' serial: cached answers of another serial are stale
	Region    string           // the region's UUID: cached answers of another region's zones are not used
	Served    []netip.Prefix   // clients that may recurse and transfer zones (loopback always may)
}

// Server is the rack's DNS server. Handle is the pure part; Serve feeds it from sockets.
type Server struct {
	cfg      Config
	log      *slog.Logger
	cache    *cache
	metrics  *metrics
	settings atomic.Pointer[Settings]
	now      func() time.Time
}

// New builds a server; it answers nothing but REFUSED until Configure.
func New(cfg Config) (*Server, error) {
	if cfg.Region == nil {
		return nil, errors.New("rack DNS: no region to ask")
	}
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = DefaultCacheSize
	}
	if cfg.MaxStale <= 0 {
		cfg.MaxStale = DefaultMaxStale
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{cfg: cfg, log: cfg.Logger, cache: newCache(cfg.CacheSize), now: time.Now}
	var err error
	if s.metrics, err = newMetrics(cfg.Registry, func() float64 { return float64(s.cache.len()) }); err != nil {
		return nil, err
	}
	s.settings.Store(&Settings{})
	return s, nil
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
// transfers need it). It never returns nil.
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
	q := req.Question[0]
	ours := st.inZones(q.Name)
	trusted := src.Unmap().IsLoopback() || st.serves(src)
	switch {
	case q.Qtype == mdns.TypeAXFR || q.Qtype == mdns.TypeIXFR:
		if !trusted {
			return s.refuse(req, mdns.RcodeRefused, refusedNotServed)
		}
		if !tcp || !ours {
			return s.refuse(req, mdns.RcodeRefused, refusedTransfer)
		}
		return s.transfer(ctx, req)
	case !ours && !trusted:
		return s.refuse(req, mdns.RcodeRefused, refusedNotServed)
	case !ours && len(st.Upstreams) == 0:
		return s.refuse(req, mdns.RcodeRefused, refusedNoUpstream)
	}
	m := s.resolve(ctx, req, q, st, ours)
	m.RecursionAvailable = trusted // the rack recurses (through its upstreams) for its own clients only
	return m
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
	actx, cancel := context.WithTimeout(ctx, 2*s.cfg.Timeout)
	defer cancel()
	var ans *mdns.Msg
	var err error
	source := fromRegion
	if ours {
		ans, err = s.cfg.Region.Exchange(actx, fwd, st.Serial)
	} else {
		source = fromUpstream
		fwd.RecursionDesired = true
		fwd.SetEdns0(mdns.DefaultMsgSize, false)
		ans, err = upstreams{addrs: st.Upstreams, timeout: s.cfg.Timeout}.exchange(actx, fwd)
	}
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
	actx, cancel := context.WithTimeout(ctx, 2*s.cfg.Timeout)
	defer cancel()
	ans, err := s.cfg.Region.Exchange(actx, fwd, s.settings.Load().Serial)
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

func (st *Settings) serves(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range st.Served {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ServeDNS implements mdns.Handler.
func (s *Server) ServeDNS(w mdns.ResponseWriter, req *mdns.Msg) {
	var src netip.Addr
	tcp := false
	switch a := w.RemoteAddr().(type) {
	case *net.UDPAddr:
		src, _ = netip.AddrFromSlice(a.IP)
	case *net.TCPAddr:
		src, _ = netip.AddrFromSlice(a.IP)
		tcp = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*s.cfg.Timeout)
	defer cancel()
	m := s.Handle(ctx, req, src, tcp)
	regiondns.FitReply(w, req, m)
	if err := w.WriteMsg(m); err != nil {
		s.log.Debug("DNS reply not sent", "error", err)
	}
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

// Serve answers on pc and ln until ctx ends. Messages too large or not parseable are
// answered FORMERR (or ignored when even the header is unreadable) and counted.
func (s *Server) Serve(ctx context.Context, pc net.PacketConn, ln net.Listener) error {
	return regiondns.Serve(ctx, s, pc, ln, func(srv *mdns.Server) {
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
