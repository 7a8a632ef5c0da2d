// Package server is the region controller's HTTP API (see region/api/routes.go) over the
// PostgreSQL store. It keeps no state of its own, so several processes can share one database.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/ironflow/ironflow/internal/ratelimit"
	"github.com/ironflow/ironflow/region/api"
	regiondns "github.com/ironflow/ironflow/region/dns"
	"github.com/ironflow/ironflow/region/images"
	"github.com/ironflow/ironflow/region/store"
	"github.com/ironflow/ironflow/region/ui"
	"golang.org/x/sync/errgroup"
)

// Config configures a region server process.
type Config struct {
	DatabaseURL string // PostgreSQL connection string
	Listen      string // address of the HTTP API, default ":5240"
	Name        string // region name, default the host name
	PublicURL   string // URL racks, clients and other regions reach this process at
	AdminToken  string // admin token to install at bootstrap (IRONFLOW_ADMIN_TOKEN); "" mints one
	// AdminTokenOut is where Run prints an admin token it minted at the first start, for the
	// operator: the only time that token is shown. Run needs it when AdminToken is "".
	AdminTokenOut io.Writer
	RackSecret    string // secret racks register with (IRONFLOW_RACK_SECRET); "" mints one stored in the database
	Version       string // reported by /api/v1/info
	Logger        *slog.Logger
	Limits        Limits    // HTTP limits; zero fields take DefaultLimits
	Retention     Retention // how long audit events are kept; zero keeps them all
	// DNSListen is the address ("host:port") the region answers DNS on, over UDP and TCP;
	// "" answers DNS only to racks, over HTTP (api.DNSQueryPath).
	DNSListen string
	// DNSTransferFrom may transfer zones (AXFR, over TCP only) from DNSListen; nil: loopback
	// and the addresses racks heartbeat to this process from.
	DNSTransferFrom regiondns.TransferFrom
	// SyslogRetention is how long machines' syslog messages are kept; zero keeps them all.
	SyslogRetention Retention
	Enlist          EnlistLimits // zero fields take the defaults
	// ImagesDir holds the bytes of the region's OS images (region/images); "" stores none
	// (uploads and downloads answer 503). Every process of a region needs the same files:
	// one process, or a directory they share.
	ImagesDir string
	// ImageMaxBytes is the largest image an upload may carry; 0 is DefaultImageMaxBytes.
	ImageMaxBytes int64
	// UI serves the web UI at / (region/ui); TemporalUI is the Temporal web UI it links moves
	// to, SecureCookies marks its cookies Secure behind a TLS-terminating proxy.
	UI            bool
	TemporalUI    string
	SecureCookies bool
	// UITransfers lets the UI start and control rack transfers (region/ui/uitemporal); nil: it does not.
	UITransfers ui.Transfers
}

const (
	heartbeatInterval = 10 * time.Second
	shutdownTimeout   = 10 * time.Second
)

// Server serves the region API for one store.
type Server struct {
	st       *store.Store
	cfg      Config
	log      *slog.Logger
	mux      *http.ServeMux
	patterns map[string]bool // registered patterns, to tell the mux's own answers apart
	table    []route         // every route in registration order (Routes)
	uiTable  []ui.Route      // the web UI's routes (UIRoutes)
	metrics  *metrics
	configs  *configCache
	dns      *regiondns.Server
	// enlistLimit is each caller's budget of enlistment reports (enlist.go).
	enlistLimit *ratelimit.Keyed[string]
	// blobs holds the images' bytes (images.go); nil without Config.ImagesDir, or when it
	// cannot be opened (blobsErr, which Run refuses to start with).
	blobs    *images.Blobs
	blobsErr error

	idMu sync.Mutex
	uuid string // region UUID, fixed once the database has one
}

// handlerFunc is an API handler; a returned error is answered as JSON by writeError.
type handlerFunc func(w http.ResponseWriter, r *http.Request, c *call) error

// call is what the auth middleware learnt about the caller.
type call struct {
	by  store.Principal
	own bool // the caller may only touch its own machine and that machine's jobs
}

// route is one pattern with what it touches, for the permission table.
type route struct {
	pattern  string
	public   bool   // no token needed
	resource string // a permissions resource
	write    bool
	ownable  bool // the handler enforces ownOnly access (checkOwner)
	// queue is the kind of a write that is queued while it touches a paused rack (queue.go):
	// set on the generic write routes of the kinds tied to racks, and on the writes to a
	// machine's secrets and ad-hoc jobs.
	queue string
	h     handlerFunc
}

// New returns a server for st. Run opens the store and calls New; tests and dev stacks call
// New and Serve directly.
func New(st *store.Store, cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{
		st:       st,
		cfg:      cfg,
		log:      cfg.Logger,
		mux:      http.NewServeMux(),
		patterns: map[string]bool{},
		metrics:  newMetrics(),
		configs:  newConfigCache(st),

		enlistLimit: newEnlistLimiter(cfg.Enlist),
	}
	if s.cfg.ImageMaxBytes <= 0 {
		s.cfg.ImageMaxBytes = DefaultImageMaxBytes
	}
	if cfg.ImagesDir != "" {
		s.blobs, s.blobsErr = images.Open(cfg.ImagesDir)
	}
	s.dns = regiondns.NewServer(st, 0, cfg.Logger)
	s.routes()
	if cfg.UI {
		s.mountUI()
	}
	return s
}

func (s *Server) routes() {
	metricsHandler := s.metrics.handler()
	p := api.PathPrefix
	s.handle(route{pattern: "GET /healthz", public: true, h: s.healthz})
	s.handle(route{pattern: "GET /metrics", public: true, h: func(w http.ResponseWriter, r *http.Request, _ *call) error {
		metricsHandler.ServeHTTP(w, r)
		return nil
	}})
	s.handle(route{pattern: "GET " + p + "/info", public: true, h: s.info})
	s.handle(route{pattern: "GET " + p + "/events", resource: resEvents, h: s.events})
	s.handle(route{pattern: "POST " + p + "/users/{name}/token", resource: api.KindUsers, write: true, h: s.mintToken})
	s.handle(route{pattern: "GET " + p + "/jobs/{key}/log", resource: resJobLogs, ownable: true, h: s.showJobLog})
	s.handle(route{pattern: "PUT " + p + "/jobs/{key}/log", resource: resJobLogs, write: true, ownable: true, h: s.appendJobLog})
	s.handle(route{pattern: "POST " + api.DNSQueryPath, resource: resDNSQuery, h: func(w http.ResponseWriter, r *http.Request, _ *call) error {
		s.dns.ServeHTTP(w, r)
		return nil
	}})
	s.rackRoutes()
	s.proxyRoutes()
	s.transferRoutes()
	s.migrationRoutes()
	s.grantRoutes()
	s.agentRoutes()
	s.secretRoutes()
	s.powerRoutes()
	s.syslogRoutes()
	s.enlistRoutes()
	s.imageRoutes()
	for _, k := range kinds {
		coll, item := p+"/"+k.name, p+"/"+k.name+"/{key}"
		s.handle(route{pattern: "GET " + coll, resource: k.name, ownable: true, h: s.list(k)})
		queue := ""
		if len(rackTies[k.name]) > 0 {
			queue = k.name
		}
		s.handle(route{pattern: "POST " + coll, resource: k.name, write: true, queue: queue, h: s.create(k)})
		s.handle(route{pattern: "GET " + item, resource: k.name, ownable: true, h: s.show(k)})
		s.handle(route{pattern: "PUT " + item, resource: k.name, write: true, queue: queue, h: s.replace(k)})
		s.handle(route{pattern: "PATCH " + item, resource: k.name, write: true, queue: queue, h: s.patch(k)})
		s.handle(route{pattern: "DELETE " + item, resource: k.name, write: true, queue: queue, h: s.remove(k)})
	}
}

// handle registers rt behind authentication and the permission table.
func (s *Server) handle(rt route) {
	s.patterns[rt.pattern] = true
	s.table = append(s.table, rt)
	s.mux.HandleFunc(rt.pattern, func(w http.ResponseWriter, r *http.Request) {
		c := &call{}
		if err := checkRequestText(r); err != nil {
			s.writeError(w, r, err)
			return
		}
		if !rt.public {
			by, known := replayedBy(r.Context())
			if !known {
				by, known = signedInAs(r.Context())
			}
			if !known {
				var err error
				if by, err = s.authenticate(r); err != nil {
					s.writeError(w, r, err)
					return
				}
			}
			acc := authorize(by.Role, rt.resource, rt.write)
			if acc == denied || acc == ownOnly && !rt.ownable {
				s.writeError(w, r, forbidden(by.Role, rt.resource, rt.write))
				return
			}
			if err := refuseSecretLookups(r, by.Role); err != nil {
				s.writeError(w, r, err)
				return
			}
			c.by, c.own = by, acc == ownOnly
			if isMoveCall(r, c) {
				r = r.WithContext(store.AsMove(r.Context()))
			}
		}
		if rt.queue != "" {
			queued, err := s.holdWrite(w, r, c, kindNamed(rt.queue), rt.h)
			if err != nil {
				s.writeError(w, r, err)
			}
			if queued || err != nil {
				return
			}
		}
		if err := rt.h(w, r, c); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// authenticate resolves the bearer token of r to its principal.
func (s *Server) authenticate(r *http.Request) (store.Principal, error) {
	token, err := bearer(r)
	if err != nil {
		return store.Principal{}, err
	}
	return s.st.Authenticate(r.Context(), token)
}

// bearer returns the token of r's "Authorization: Bearer" header.
func bearer(r *http.Request) (string, error) {
	header := r.Header.Get("Authorization")
	if header == "" {
		return "", errorf(http.StatusUnauthorized, "missing Authorization header, expected \"Bearer <token>\"")
	}
	scheme, token, _ := strings.Cut(header, " ")
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", errorf(http.StatusUnauthorized, "Authorization header must be \"Bearer <token>\"")
	}
	return token, nil
}

// Handler returns the API with metrics, panic recovery and JSON answers for unknown routes.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(s.serveHTTP)
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w}
	h, pattern := s.mux.Handler(r)
	routeLabel := routeUnmatched
	if s.patterns[pattern] {
		_, routeLabel, _ = strings.Cut(pattern, " ")
	}
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("handler panic", "method", r.Method, "path", r.URL.Path, "panic", v)
			if rec.code == 0 {
				writeJSON(rec, http.StatusInternalServerError, api.Error{Error: "internal server error", Code: http.StatusInternalServerError})
			}
		}
		code := rec.code
		if code == 0 { // nothing written: net/http answers 200
			code = http.StatusOK
		}
		s.metrics.observe(routeLabel, r.Method, code, time.Since(start))
	}()
	if routeLabel == routeUnmatched {
		s.serveUnmatched(rec, r, h)
		return
	}
	s.mux.ServeHTTP(rec, r)
}

// serveUnmatched runs h, the mux's own handler for r, and gives its 404 and 405 answers a
// JSON body (keeping Allow); anything else it answers (a redirect) passes through.
func (s *Server) serveUnmatched(w http.ResponseWriter, r *http.Request, h http.Handler) {
	probe := &headerProbe{header: http.Header{}}
	h.ServeHTTP(probe, r)
	switch probe.code {
	case http.StatusNotFound:
		s.writeError(w, r, errorf(http.StatusNotFound, "no route for %s %s", r.Method, r.URL.Path))
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", probe.header.Get("Allow"))
		s.writeError(w, r, errorf(http.StatusMethodNotAllowed, "method %s is not allowed for %s (allowed: %s)", r.Method, r.URL.Path, probe.header.Get("Allow")))
	default:
		for name, values := range probe.header {
			w.Header()[name] = values
		}
		w.WriteHeader(probe.code)
	}
}

// headerProbe records the header and status of the mux's own handlers and drops the body.
type headerProbe struct {
	header http.Header
	code   int
}

func (p *headerProbe) Header() http.Header { return p.header }
func (p *headerProbe) WriteHeader(code int) {
	if p.code == 0 {
		p.code = code
	}
}
func (p *headerProbe) Write(b []byte) (int, error) {
	p.WriteHeader(http.StatusOK)
	return len(b), nil
}

// Serve answers HTTP on ln and heartbeats the public URL until ctx ends, then shuts down
// gracefully and closes ln. The first heartbeat is sent before serving, so the process is
// listed in Info.Endpoints as soon as it answers.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:  s.Handler(),
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	ln = s.cfg.Limits.orDefault().apply(srv, ln)
	s.heartbeat(ctx)
	g, ctx := errgroup.WithContext(ctx)
	// Requests end with the server: an agent's long poll (up to a minute) answers 204 at
	// shutdown instead of outliving the shutdown deadline.
	srv.BaseContext = func(net.Listener) context.Context { return ctx }
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve HTTP on %s: %w", ln.Addr(), err)
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		// ctx is over; the shutdown gets a fresh deadline of its own.
		shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(shutdownCtx); err != nil {
			return fmt.Errorf("shut down HTTP server: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		s.replayLeftWrites(ctx)
		return nil
	})
	g.Go(func() error { return s.prune(ctx, "audit log", s.cfg.Retention, s.st.PruneEvents) })
	g.Go(func() error { return s.prune(ctx, "syslog", s.cfg.SyslogRetention, s.st.PruneSyslog) })
	if s.cfg.DNSListen != "" {
		g.Go(func() error { return s.dns.ListenAndServe(ctx, s.cfg.DNSListen, s.cfg.DNSTransferFrom) })
	}
	g.Go(func() error {
		tick := time.NewTicker(heartbeatInterval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
				s.heartbeat(ctx)
			}
		}
	})
	return g.Wait()
}

// heartbeat records the public URL in the store, so other processes list this one in
// Info.Endpoints.
func (s *Server) heartbeat(ctx context.Context) {
	if s.cfg.PublicURL == "" {
		return
	}
	if err := s.st.Heartbeat(ctx, s.cfg.PublicURL); err != nil && ctx.Err() == nil {
		s.log.Warn("heartbeat failed", "url", s.cfg.PublicURL, "error", err)
	}
}
