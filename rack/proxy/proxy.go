// Package proxy is the rack's HTTP forward proxy for the machines it serves (port 8000, as
// MAAS's squid): absolute-form GET and HEAD of http URLs, CONNECT tunnels to the allowed
// ports, and a disk cache of what machines fetch again and again (package files, indexes,
// images). Only clients of the rack's subnets are served, and nothing is carried to the
// control plane (the rack's own and its regions' addresses), loopback or link-local.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/netutil"
)

// DefaultPort is where racks serve the proxy, as MAAS does.
const DefaultPort = 8000

// Settings are what the region decides of a rack's proxy; they change while it serves.
type Settings struct {
	Enabled      bool
	Parent       *url.URL // the site proxy every request goes through; nil: direct
	ConnectPorts []int    // the ports CONNECT may reach
	// SubnetParents are the parents of clients of these subnets instead of Parent.
	SubnetParents []SubnetParent
}

// SubnetParent is the parent proxy of the clients of one subnet.
type SubnetParent struct {
	Prefix netip.Prefix
	Parent *url.URL
}

// Config configures a Server.
type Config struct {
	Serves   func(netip.Addr) bool // whether an address is a client: in a served subnet
	Targets  Targets
	Cache    *Cache // nil: nothing is cached
	Settings Settings
	Registry prometheus.Registerer
	Logger   *slog.Logger
	Limits   Limits // zero fields take the defaults
}

// Limits bound what a client or an upstream can hold of the proxy.
type Limits struct {
	ReadHeaderTimeout time.Duration // a request's headers (default 10s): slow clients are cut off
	IdleTimeout       time.Duration // keep-alive connections with no request (default 1m)
	MaxHeaderBytes    int           // default 32 KiB
	MaxConns          int           // open client connections; more wait in the backlog (default 1024)
	MaxConnsPerClient int           // open connections of one address; more are closed (default 64)
	DialTimeout       time.Duration // connecting to an upstream (default 10s)
	// UpstreamHeaderTimeout bounds the wait for an upstream's answer (default 1m).
	UpstreamHeaderTimeout time.Duration
	// StallTimeout is how long a body may move no byte, from the upstream or to the client,
	// before the transfer is cut (default 1m): a hung upstream or a client that stopped
	// reading holds nothing longer.
	StallTimeout time.Duration
	TunnelIdle   time.Duration // a CONNECT tunnel with no traffic either way (default 10m)
}

func (l *Limits) defaults() {
	setDefault(&l.ReadHeaderTimeout, 10*time.Second)
	setDefault(&l.IdleTimeout, time.Minute)
	setDefault(&l.MaxHeaderBytes, 32<<10)
	setDefault(&l.MaxConns, 1024)
	setDefault(&l.MaxConnsPerClient, 64)
	setDefault(&l.DialTimeout, 10*time.Second)
	setDefault(&l.UpstreamHeaderTimeout, time.Minute)
	setDefault(&l.StallTimeout, time.Minute)
	setDefault(&l.TunnelIdle, 10*time.Minute)
}

func setDefault[T time.Duration | int](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Server is the rack's HTTP proxy.
type Server struct {
	cfg     Config
	log     *slog.Logger
	m       *metrics
	current atomic.Pointer[routes]
}

// upstream is the applied Settings with the transport they need.
type upstream struct {
	Settings
	transport *http.Transport
}

// New checks cfg and builds the server.
func New(cfg Config) (*Server, error) {
	if cfg.Serves == nil || cfg.Registry == nil {
		return nil, errors.New("proxy: a client check and a metrics registry are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Limits.defaults()
	m, err := newMetrics(cfg.Registry, cfg.Cache)
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With("component", "proxy"), m: m}
	s.Configure(cfg.Settings)
	return s, nil
}

// Configure applies the region's settings to the requests that start from now on.
func (s *Server) Configure(st Settings) {
	transports := map[string]*http.Transport{}
	route := func(parent *url.URL) *upstream {
		key := ""
		if parent != nil {
			key = parent.String()
		}
		if transports[key] == nil {
			transports[key] = s.transport(parent)
		}
		one := st
		one.Parent = parent
		return &upstream{Settings: one, transport: transports[key]}
	}
	rt := &routes{def: route(st.Parent)}
	for _, sp := range st.SubnetParents {
		rt.bySubnet = append(rt.bySubnet, subnetRoute{sp.Prefix, route(sp.Parent)})
	}
	// The most specific subnet first, so a client of nested subnets takes the inner one's.
	slices.SortStableFunc(rt.bySubnet, func(a, b subnetRoute) int { return b.prefix.Bits() - a.prefix.Bits() })
	if old := s.current.Swap(rt); old != nil {
		for _, t := range old.transports() {
			t.CloseIdleConnections()
		}
	}
}

// transport is the upstream transport of requests through parent, or direct with nil.
func (s *Server) transport(parent *url.URL) *http.Transport {
	l := s.cfg.Limits
	dial := s.cfg.Targets.dialer(l.DialTimeout).DialContext
	if parent != nil {
		// The site proxy is the region's choice, wherever it is: only the targets are checked.
		dial = (&net.Dialer{Timeout: l.DialTimeout, KeepAlive: 30 * time.Second}).DialContext
	}
	return &http.Transport{
		Proxy: func(*http.Request) (*url.URL, error) { return parent, nil },
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return stallConn{c, l.StallTimeout}, nil
		},
		ResponseHeaderTimeout: l.UpstreamHeaderTimeout,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		DisableCompression:    true, // the client's Accept-Encoding and the upstream's encoding pass through
	}
}

// routes are the applied settings: the upstream of each client.
type routes struct {
	def      *upstream
	bySubnet []subnetRoute // most specific first
}

type subnetRoute struct {
	prefix netip.Prefix
	up     *upstream
}

// pick is the upstream of a client: its subnet's parent, else the region's.
func (rt *routes) pick(client netip.Addr) *upstream {
	for _, r := range rt.bySubnet {
		if r.prefix.Contains(client) {
			return r.up
		}
	}
	return rt.def
}

func (rt *routes) transports() []*http.Transport {
	out := []*http.Transport{rt.def.transport}
	for _, r := range rt.bySubnet {
		out = append(out, r.up.transport)
	}
	return out
}

// Enabled says whether the region's settings let the proxy serve.
func (s *Server) Enabled() bool { return s.current.Load().def.Enabled }

// ServeListener serves on ln until ctx ends, then shuts down: requests in flight get up to
// 30 seconds. At most Limits.MaxConns connections are open at once, Limits.MaxConnsPerClient
// of one address.
func (s *Server) ServeListener(ctx context.Context, ln net.Listener) error {
	l := s.cfg.Limits
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	ln = &perClientListener{Listener: netutil.LimitListener(ln, l.MaxConns), max: l.MaxConnsPerClient, counts: map[netip.Addr]int{},
		onDrop: s.m.refusals.WithLabelValues(refusedConns).Inc}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	s.log.Info("http proxy serving", "addr", ln.Addr().String(), "cache", s.cfg.Cache != nil)
	select {
	case err := <-errc:
		return fmt.Errorf("proxy serve: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return srv.Close()
		}
		return fmt.Errorf("proxy shutdown: %w", err)
	}
	return nil
}

// ServeHTTP checks who asks for what, then tunnels, serves from the cache or forwards.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.m.inFlight.Inc()
	defer s.m.inFlight.Dec()
	client, err := netip.ParseAddrPort(r.RemoteAddr)
	up := s.current.Load().pick(client.Addr().Unmap())
	switch {
	case err != nil || !s.cfg.Serves(client.Addr().Unmap()):
		s.refuse(w, r, refusedOutsider, http.StatusForbidden, "the proxy serves the rack's subnets only")
		return
	case !up.Enabled:
		s.refuse(w, r, refusedDisabled, http.StatusServiceUnavailable, "the proxy is disabled")
		return
	case r.Method == http.MethodConnect:
		s.tunnel(w, r, up)
		return
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		w.Header().Set("Allow", "GET, HEAD, CONNECT")
		s.refuse(w, r, refusedMethod, http.StatusMethodNotAllowed, "the proxy carries GET, HEAD and CONNECT only")
		return
	case r.URL.Scheme != "http" || r.URL.Host == "" || r.URL.User != nil:
		s.refuse(w, r, refusedRequest, http.StatusBadRequest, "the proxy takes absolute http:// URLs (https through CONNECT)")
		return
	case r.ContentLength != 0 || len(r.TransferEncoding) > 0:
		s.refuse(w, r, refusedRequest, http.StatusRequestEntityTooLarge, "a GET or HEAD through the proxy carries no body")
		return
	case viaThisProxy(r.Header):
		s.refuse(w, r, refusedLoop, http.StatusLoopDetected, "the request went through a rack's proxy already")
		return
	case !httpPortAllowed(r.URL.Port()):
		s.refuse(w, r, refusedPort, http.StatusForbidden, "the proxy reaches port 80 and unprivileged ports only")
		return
	}
	if err := s.cfg.Targets.check(r.Context(), r.URL.Hostname(), up.Parent != nil); err != nil {
		s.targetFailed(w, r, err)
		return
	}
	if s.cfg.Cache != nil && r.Header.Get("Range") == "" && r.Header.Get("Authorization") == "" {
		s.serveCached(w, r, up)
		return
	}
	s.forward(w, r, up, nil, "")
}

// viaThisProxy says whether a request came through a rack's proxy already: a parent proxy
// that sends it back to a rack would loop for ever.
func viaThisProxy(h http.Header) bool {
	for _, v := range h.Values("Via") {
		if strings.Contains(v, via) {
			return true
		}
	}
	return false
}

// httpPortAllowed: plain HTTP goes to port 80 or an unprivileged port, never to another
// service's well-known port (SSH, SMTP, …), as squid's Safe_ports.
func httpPortAllowed(port string) bool {
	if port == "" || port == "80" {
		return true
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= 1024 && n <= 65535
}

// targetFailed answers a request whose target was refused (403) or did not resolve (502).
func (s *Server) targetFailed(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, ErrForbiddenTarget) {
		s.refuse(w, r, refusedTarget, http.StatusForbidden, "the proxy does not reach that address")
		return
	}
	s.upstreamFailed(w, r, err)
}

func (s *Server) refuse(w http.ResponseWriter, r *http.Request, reason string, code int, msg string) {
	s.m.refusals.WithLabelValues(reason).Inc()
	s.m.requests.WithLabelValues(resultRefused).Inc()
	s.log.Info("proxy request refused", "reason", reason, "method", r.Method, "target", r.Host, "remote", r.RemoteAddr)
	http.Error(w, msg, code)
}

func (s *Server) upstreamFailed(w http.ResponseWriter, r *http.Request, err error) {
	s.m.upstreamErr.Inc()
	s.m.requests.WithLabelValues(resultError).Inc()
	s.log.Warn("proxy upstream failed", "method", r.Method, "url", r.URL.String(), "remote", r.RemoteAddr, "error", err)
	code := http.StatusBadGateway
	if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		code = http.StatusGatewayTimeout
	}
	http.Error(w, "upstream failed", code)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
