package dns

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	mdns "github.com/miekg/dns"
	"golang.org/x/sync/errgroup"

	"github.com/ironflow/ironflow/region/api"
)

// Source reads the region's DNS data in one snapshot (*store.Store).
type Source interface {
	DNSData(ctx context.Context) (Data, error)
}

// DefaultMaxAge is how long built zones answer before the data is read again.
const DefaultMaxAge = time.Second

// maxHTTPQuery bounds a DNS message posted to the HTTP endpoint.
const maxHTTPQuery = 4096

// MaxUDPAnswer caps an answer over UDP whatever EDNS size the client names (the DNS flag
// day's 1232 bytes, which no path fragments), so a spoofed query gets little back.
const MaxUDPAnswer = 1232

// rackSeenFor is how long an address a rack heartbeat came from may transfer zones: as
// long as the region counts the rack online.
const rackSeenFor = 3 * api.RackHeartbeatInterval

// Server answers from the zones of a Source, rebuilt at most every MaxAge: a change
// is answered by every region process within MaxAge, and all of them answer alike.
type Server struct {
	src    Source
	maxAge time.Duration
	log    *slog.Logger

	mu    sync.Mutex // serialises rebuilds: one read of the data per MaxAge
	zones *Zones
	built time.Time

	racksMu sync.Mutex
	racks   map[string]rackSeen // by rack UUID: bounded by the region's racks
}

// rackSeen is where a rack's heartbeat last came from.
type rackSeen struct {
	addr netip.Addr
	at   time.Time
}

// NewServer serves src; maxAge 0 means DefaultMaxAge.
func NewServer(src Source, maxAge time.Duration, log *slog.Logger) *Server {
	if maxAge <= 0 {
		maxAge = DefaultMaxAge
	}
	return &Server{src: src, maxAge: maxAge, log: log.With("component", "dns"), racks: map[string]rackSeen{}}
}

// RackSeen records that rack's heartbeat came from addr: by default, the addresses of the
// racks online at this process may transfer zones.
func (s *Server) RackSeen(rack string, addr netip.Addr) {
	now := time.Now()
	s.racksMu.Lock()
	defer s.racksMu.Unlock()
	if _, known := s.racks[rack]; !known {
		for r, seen := range s.racks {
			if now.Sub(seen.at) > rackSeenFor {
				delete(s.racks, r)
			}
		}
	}
	s.racks[rack] = rackSeen{addr: addr.Unmap(), at: now}
}

// rackAt reports whether a rack online at this process heartbeats from addr.
func (s *Server) rackAt(addr netip.Addr) bool {
	now := time.Now()
	s.racksMu.Lock()
	defer s.racksMu.Unlock()
	for _, seen := range s.racks {
		if seen.addr == addr && now.Sub(seen.at) <= rackSeenFor {
			return true
		}
	}
	return false
}

// Zones returns the current zones, rebuilding them when older than MaxAge or than serial
// minSerial (0: any serial).
func (s *Server) Zones(ctx context.Context, minSerial uint32) (*Zones, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.zones != nil && time.Since(s.built) < s.maxAge && !olderSerial(s.zones.Serial, minSerial) {
		return s.zones, nil
	}
	d, err := s.src.DNSData(ctx)
	if err != nil {
		return nil, fmt.Errorf("read DNS data: %w", err)
	}
	z := Build(d)
	if s.zones == nil || z.Serial != s.zones.Serial {
		s.log.Debug("zones built", "serial", z.Serial, "zones", len(z.origins), "skipped_machines", z.Skipped)
	}
	s.zones, s.built = z, time.Now()
	return z, nil
}

// olderSerial reports whether serial have is older than want in RFC 1982 arithmetic.
func olderSerial(have, want uint32) bool {
	return want != 0 && int32(want-have) > 0
}

// answer answers req from zones of serial minSerial or newer, or SERVFAIL when the data
// cannot be read.
func (s *Server) answer(ctx context.Context, req *mdns.Msg, minSerial uint32) *mdns.Msg {
	z, err := s.Zones(ctx, minSerial)
	if err != nil {
		s.log.Warn("DNS query answered SERVFAIL", "error", err)
		return new(mdns.Msg).SetRcode(req, mdns.RcodeServerFailure)
	}
	return z.Answer(req)
}

// TransferFrom are the networks that may transfer zones (AXFR, IXFR; over TCP only) from the
// DNS listener. nil is the default: loopback and the addresses of the racks online at this
// process (RackSeen); empty is nobody.
type TransferFrom []netip.Prefix

// ParseTransferFrom reads a comma-separated list of networks (CIDR) and addresses: "" is
// the default (nil), "none" is nobody.
func ParseTransferFrom(v string) (TransferFrom, error) {
	switch strings.TrimSpace(v) {
	case "":
		return nil, nil
	case "none":
		return TransferFrom{}, nil
	}
	out := TransferFrom{}
	for f := range strings.SplitSeq(v, ",") {
		f = strings.TrimSpace(f)
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("%q is neither a network (CIDR) nor an address", f)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// listener answers the DNS listener's queries: zone transfers only over TCP and from its
// TransferFrom.
type listener struct {
	s            *Server
	transferFrom TransferFrom
}

func (l listener) ServeDNS(w mdns.ResponseWriter, req *mdns.Msg) {
	var m *mdns.Msg
	if isTransfer(req) && !l.mayTransfer(w.RemoteAddr()) {
		m = new(mdns.Msg).SetRcode(req, mdns.RcodeRefused)
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		m = l.s.answer(ctx, req, 0)
	}
	FitReply(w, req, m)
	if err := w.WriteMsg(m); err != nil {
		l.s.log.Debug("DNS reply not sent", "error", err)
	}
}

func isTransfer(req *mdns.Msg) bool {
	return len(req.Question) == 1 && (req.Question[0].Qtype == mdns.TypeAXFR || req.Question[0].Qtype == mdns.TypeIXFR)
}

// mayTransfer reports whether a client at remote may transfer a zone.
func (l listener) mayTransfer(remote net.Addr) bool {
	tcp, ok := remote.(*net.TCPAddr)
	if !ok {
		return false // a whole zone over UDP is what an amplifier sends
	}
	a, _ := netip.AddrFromSlice(tcp.IP)
	a = a.Unmap()
	if l.transferFrom == nil {
		return a.IsLoopback() || l.s.rackAt(a)
	}
	for _, p := range l.transferFrom {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// FitReply echoes EDNS0 and, over UDP, truncates m to what the client accepts: 512 bytes
// without EDNS, its EDNS size up to MaxUDPAnswer with it; the TC bit says what was left out.
func FitReply(w mdns.ResponseWriter, req, m *mdns.Msg) {
	size := mdns.MinMsgSize
	if opt := req.IsEdns0(); opt != nil {
		size = min(max(int(opt.UDPSize()), mdns.MinMsgSize), MaxUDPAnswer)
		if m.IsEdns0() == nil {
			m.SetEdns0(MaxUDPAnswer, false)
		}
	}
	if _, udp := w.LocalAddr().(*net.UDPAddr); udp {
		m.Truncate(size)
	}
}

// ServeHTTP is the racks' endpoint (api.DNSQueryPath): a DNS message in, the answer out,
// both in wire format (RFC 8484's POST form).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST a DNS message", http.StatusMethodNotAllowed)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != api.DNSMessageType {
		http.Error(w, fmt.Sprintf("Content-Type %q: want %s", ct, api.DNSMessageType), http.StatusUnsupportedMediaType)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxHTTPQuery+1))
	if err != nil {
		http.Error(w, "read DNS message: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > maxHTTPQuery {
		http.Error(w, fmt.Sprintf("DNS message larger than %d bytes", maxHTTPQuery), http.StatusRequestEntityTooLarge)
		return
	}
	req := new(mdns.Msg)
	if err := req.Unpack(body); err != nil {
		http.Error(w, "malformed DNS message: "+err.Error(), http.StatusBadRequest)
		return
	}
	var minSerial uint32
	if v := r.Header.Get(api.DNSSerialHeader); v != "" {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			http.Error(w, fmt.Sprintf("%s %q is not a serial", api.DNSSerialHeader, v), http.StatusBadRequest)
			return
		}
		minSerial = uint32(n)
	}
	out, err := s.answer(r.Context(), req, minSerial).Pack()
	if err != nil {
		http.Error(w, "pack DNS answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", api.DNSMessageType)
	_, _ = w.Write(out)
}

// ListenAndServe answers on addr over UDP and TCP until ctx ends; transferFrom may
// transfer zones over TCP.
func (s *Server) ListenAndServe(ctx context.Context, addr string, transferFrom TransferFrom) error {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return fmt.Errorf("DNS: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		pc.Close()
		return fmt.Errorf("DNS: %w", err)
	}
	return Serve(ctx, listener{s: s, transferFrom: transferFrom}, pc, ln, nil)
}

// Serve runs h on an open UDP socket and TCP listener until ctx ends (shared by the region
// and rack DNS servers). configure, when set, adjusts both miekg/dns servers before they
// start (buffer sizes, hooks).
func Serve(ctx context.Context, h mdns.Handler, pc net.PacketConn, ln net.Listener, configure func(*mdns.Server)) error {
	servers := []*mdns.Server{
		{PacketConn: pc, Handler: h},
		{Listener: ln, Handler: h, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second},
	}
	if configure != nil {
		for _, srv := range servers {
			configure(srv)
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, srv := range servers {
		g.Go(func() error {
			if err := srv.ActivateAndServe(); err != nil && gctx.Err() == nil {
				return fmt.Errorf("DNS server: %w", err)
			}
			return nil
		})
	}
	g.Go(func() error {
		<-gctx.Done()
		// Closing the sockets ends both servers (miekg/dns's Shutdown refuses a server that
		// has not started yet, which may be the case here).
		pc.Close()
		ln.Close()
		return nil
	})
	return g.Wait()
}
