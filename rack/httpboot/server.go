// Package httpboot is the rack's HTTP service (:5248): iPXE scripts, boot assets with Range
// support, and a reverse proxy of the agent and metadata APIs to the current region with
// failover.
package httpboot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/net/netutil"
	"golang.org/x/time/rate"

	"github.com/ironflow/ironflow/rack/bootfs"
	"github.com/ironflow/ironflow/region/api"
)

// DefaultAddr is where racks serve HTTP boot, as MAAS does.
const DefaultAddr = ":5248"

// Region forwards requests to the current region, failing over to the others
// (regionlink.Link implements it).
type Region interface {
	Do(req *http.Request) (*http.Response, error)
	Current() *url.URL
}

// Config configures a Server.
type Config struct {
	Dir       *bootfs.Dir
	Machines  MachineLookup
	Discovery Boot // what unknown machines boot: the enlistment/discovery environment
	// Syslog is where the rack receives syslog (zero: it does not), named on the discovery
	// environment's command line (api.KernelParamSyslog); an unspecified address means the
	// address the machine reached HTTP boot at.
	Syslog   netip.AddrPort
	Region   Region
	Enlister Enlister // forwards unknown machines' reports to the region
	// Registry receives the server's metrics and is what /metrics serves, so the rack can
	// register its other services' metrics there too.
	Registry *prometheus.Registry
	Logger   *slog.Logger
	Limits   Limits // zero fields take the defaults
	// ProxyURL is the rack's HTTP proxy for machines reaching the rack at host ("" while it
	// serves none); nil: none.
	ProxyURL func(host string) string
	Enlist   EnlistLimits
	// Images are the region's OS images as the rack caches them (images.go); nil serves none.
	Images Images
	// Serves says whether an address is one of the rack's clients, the only ones (with
	// loopback) that may download images; nil: loopback only.
	Serves func(netip.Addr) bool
}

// Limits bound what one client can hold of the server: a connection that sends nothing, a
// body trickled in, an idle keep-alive connection, a download that stalls.
type Limits struct {
	ReadHeaderTimeout time.Duration // default 10s
	// ReadTimeout bounds reading a request, body included, and WriteTimeout its response
	// (both default 2m: above the region's 60 s agent long poll, which the proxy carries,
	// since net/http cancels a request's context when its read deadline passes). A boot
	// asset gets AssetWriteBase plus the time to send it at AssetMinRate instead.
	ReadTimeout    time.Duration
	WriteTimeout   time.Duration
	AssetWriteBase time.Duration // default 1m
	AssetMinRate   int64         // bytes per second (default 256 KiB/s)
	IdleTimeout    time.Duration // keep-alive connections with no request (default 1m)
	MaxHeaderBytes int           // default 64 KiB
	MaxConns       int           // open connections; more wait in the listen backlog (default 1024)
}

func (l *Limits) defaults() {
	setDefault(&l.ReadHeaderTimeout, 10*time.Second)
	setDefault(&l.ReadTimeout, 2*time.Minute)
	setDefault(&l.WriteTimeout, 2*time.Minute)
	setDefault(&l.AssetWriteBase, time.Minute)
	setDefault(&l.AssetMinRate, 256<<10)
	setDefault(&l.IdleTimeout, time.Minute)
	setDefault(&l.MaxHeaderBytes, 64<<10)
	setDefault(&l.MaxConns, 1024)
}

func setDefault[T time.Duration | int | int64 | rate.Limit](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// assetDeadline is how long sending size bytes of a boot asset may take.
func (l *Limits) assetDeadline(size int64) time.Duration {
	return l.AssetWriteBase + time.Duration(size/l.AssetMinRate)*time.Second
}

// Server is the rack's HTTP boot service.
type Server struct {
	cfg         Config
	log         *slog.Logger
	handler     http.Handler
	metrics     *metrics
	enlistLimit *enlistLimiter
}

// New checks cfg and builds the server.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Dir == nil:
		return nil, errors.New("httpboot: a boot directory is required")
	case cfg.Machines == nil:
		return nil, errors.New("httpboot: a machine lookup is required")
	case cfg.Region == nil:
		return nil, errors.New("httpboot: a region link is required")
	case cfg.Enlister == nil:
		return nil, errors.New("httpboot: an enlister is required")
	case cfg.Registry == nil:
		return nil, errors.New("httpboot: a metrics registry is required")
	}
	if err := cfg.Discovery.validate(); err != nil {
		return nil, fmt.Errorf("httpboot: discovery boot: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Limits.defaults()
	cfg.Enlist.defaults()
	m, err := newMetrics(cfg.Registry, cfg.Region)
	if err != nil {
		return nil, fmt.Errorf("httpboot: %w", err)
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With("component", "httpboot"), metrics: m, enlistLimit: newEnlistLimiter(cfg.Enlist)}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /ipxe/boot.ipxe", s.serveBootScript)
	mux.HandleFunc("GET /ipxe/mac/{file}", s.serveMachineScript)
	mux.HandleFunc("GET /ipxe/enlist", s.serveEnlist)
	mux.HandleFunc("POST "+api.PathPrefix+"/enlist", s.serveAgentEnlist)
	mux.HandleFunc("GET "+api.PathPrefix+"/"+api.KindCommissioningScripts, s.serveCommissioningScripts)
	mux.HandleFunc("GET /boot/{path...}", s.serveAsset)
	mux.HandleFunc("GET "+api.RackImagePath+"{name}", s.serveImage)
	proxy := s.newProxy()
	mux.Handle("/api/v1/agent/", proxy)
	mux.Handle("/metadata/", proxy)
	mux.HandleFunc("GET /healthz", s.serveHealth)
	mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{}))
	s.handler = mux
	return s, nil
}

// Handler is the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// ServeListener serves on ln until ctx ends, then shuts down gracefully: requests in flight
// (a kernel download, a proxied agent call) get up to 30 seconds to finish. At most
// Limits.MaxConns connections are open at once.
func (s *Server) ServeListener(ctx context.Context, ln net.Listener) error {
	l := s.cfg.Limits
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	ln = netutil.LimitListener(ln, l.MaxConns)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	s.log.Info("http boot serving", "addr", ln.Addr().String(), "dir", s.cfg.Dir.Root())
	select {
	case err := <-errc:
		return fmt.Errorf("httpboot serve: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("httpboot shutdown: %w", err)
	}
	return nil
}

func (s *Server) serveHealth(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"Status": "ok", "Region": s.cfg.Region.Current().String()})
}

// serveAsset serves a file of the boot directory; http.ServeContent handles Range,
// If-Modified-Since and HEAD.
func (s *Server) serveAsset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("path")
	f, info, err := s.cfg.Dir.OpenFile(name)
	if err != nil {
		code := http.StatusForbidden
		if errors.Is(err, fs.ErrNotExist) {
			code = http.StatusNotFound
		}
		s.log.Info("boot asset refused", "path", name, "remote", r.RemoteAddr, "error", err)
		writeError(w, code, http.StatusText(code)+": "+name)
		return
	}
	defer f.Close()
	// Large images on slow links outlast the server's timeouts: give this response the time
	// its size needs at the minimum rate instead (the read deadline too, whose expiry would
	// cancel the request's context).
	deadline := time.Now().Add(s.cfg.Limits.assetDeadline(info.Size()))
	rc := http.NewResponseController(w)
	if err := errors.Join(rc.SetWriteDeadline(deadline), rc.SetReadDeadline(deadline)); err != nil {
		s.log.Warn("boot asset: cannot extend the deadlines", "path", name, "error", err)
	}
	http.ServeContent(w, r, info.Name(), info.ModTime(), f)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// writeError answers with the API's error body.
func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, api.Error{Error: msg, Code: code})
}
