package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/ironflow/ironflow/internal/backoff"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

// Options tune an Agent; zero fields take the defaults noted.
type Options struct {
	Version     string       // reported at check-in; default "dev"
	Hostname    string       // default os.Hostname()
	Logger      *slog.Logger // default slog.Default()
	HTTPClient  *http.Client // its redirect policy is replaced: a 307 reaches the agent
	Backoff     Backoff      // default 500ms .. 30s
	LogInterval time.Duration
	LogChunk    int // bytes of job output that trigger a send before LogInterval; default 64 KiB
}

// Agent runs the jobs its region hands to its machine.
type Agent struct {
	path string
	opts Options
	log  *slog.Logger
	http *http.Client

	mu      sync.Mutex
	cfg     Config
	current int // index in cfg.Endpoints of the endpoint in use
}

// New loads the config at path; a missing or invalid config is refused.
func New(path string, opts Options) (*Agent, error) {
	cfg, err := LoadConfig(path)
	if err != nil {
		return nil, err
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.Hostname == "" {
		opts.Hostname, _ = os.Hostname()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Backoff.Min <= 0 {
		opts.Backoff.Min = 500 * time.Millisecond
	}
	if opts.Backoff.Max < opts.Backoff.Min {
		opts.Backoff.Max = max(30*time.Second, opts.Backoff.Min)
	}
	if opts.LogInterval <= 0 {
		opts.LogInterval = time.Second
	}
	if opts.LogChunk <= 0 {
		opts.LogChunk = 64 << 10
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	// region/client returns a 307 ("the machine migrated") to the agent as a
	// *client.RedirectError: net/http does not replay the request at the destination behind
	// its back.
	return &Agent{path: path, opts: opts, log: opts.Logger, http: hc, cfg: cfg}, nil
}

// Config returns the config in use.
func (a *Agent) Config() Config {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.cfg
	c.Endpoints = append([]string(nil), c.Endpoints...)
	return c
}

func (a *Agent) endpoint() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cfg.Endpoints[a.current]
}

func (a *Agent) machine() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cfg.Machine
}

// credential is the machine's agent credential, sent as its bearer token.
func (a *Agent) credential() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return "machine:" + a.cfg.Machine + ":" + a.cfg.Secret
}

func (a *Agent) pollWait() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cfg.PollWait
}

// failover moves to the next endpoint unless another call already moved away from failed.
func (a *Agent) failover(failed string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cfg.Endpoints[a.current] != failed || len(a.cfg.Endpoints) == 1 {
		return
	}
	a.current = (a.current + 1) % len(a.cfg.Endpoints)
	a.log.Info("agent endpoint failover", "from", failed, "to", a.cfg.Endpoints[a.current])
}

// follow repoints the agent at the endpoint a migrated machine's 307 names and persists it.
func (a *Agent) follow(from string, r *client.RedirectError) error {
	if err := redirectEndpoint(r); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if r.Machine != "" && r.Machine != a.cfg.Machine {
		return fmt.Errorf("redirect for machine %s, this is machine %s", r.Machine, a.cfg.Machine)
	}
	to := strings.TrimRight(r.Endpoint, "/")
	if to == from {
		return fmt.Errorf("redirect from %s to itself", from)
	}
	cfg := a.cfg.WithEndpoint(to)
	// Keep working at the new endpoint even if the disk refuses the write: staying on the
	// old region would only collect more redirects.
	if err := WriteConfig(a.path, cfg); err != nil {
		a.log.Error("machine migrated but the agent config could not be rewritten", "to", to, "error", err)
	} else {
		a.log.Info("machine migrated: agent config rewritten", "from", from, "to", to, "config", a.path)
	}
	a.cfg, a.current = cfg, 0
	return nil
}

// Serve checks in, then runs the jobs the region hands out until ctx ends. Network failures,
// region errors and migrations are handled inside; it returns nil when ctx ends.
func (a *Agent) Serve(ctx context.Context) error {
	wait := a.opts.Backoff.start()
	for {
		progressed, err := a.session(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, errMoved):
			wait.Reset()
			continue
		case progressed:
			wait.Reset()
		}
		a.log.Error("agent session failed", "error", err)
		if backoff.Sleep(ctx, wait.Next()) != nil {
			return nil
		}
	}
}

// session checks in and then polls for and runs jobs until a call fails; progressed reports
// whether the check-in succeeded.
func (a *Agent) session(ctx context.Context) (progressed bool, err error) {
	if err := a.checkin(ctx); err != nil {
		return false, err
	}
	for {
		job, err := a.nextJob(ctx)
		if err != nil {
			return true, err
		}
		if job == nil {
			continue
		}
		a.runJob(ctx, *job)
		if err := a.checkin(ctx); err != nil {
			return true, err
		}
	}
}

func (a *Agent) checkin(ctx context.Context) error {
	var used string
	req := request{
		method: http.MethodPost, path: "/checkin", timeout: 30 * time.Second,
		// The region records the endpoint the agent reached it by: the one of this attempt.
		bodyFor: func(endpoint string) any {
			used = endpoint
			return api.AgentCheckin{Version: a.opts.Version, Hostname: a.opts.Hostname, Endpoint: endpoint}
		},
	}
	var out api.AgentConfig
	if _, err := a.callJSON(ctx, req, &out); err != nil {
		return fmt.Errorf("check-in: %w", err)
	}
	// The region may suggest another long-poll wait; the config file keeps the operator's.
	if d, err := time.ParseDuration(out.PollWait); err == nil && d > 0 && d <= MaxPollWait {
		a.mu.Lock()
		a.cfg.PollWait = d
		a.mu.Unlock()
	}
	a.log.Info("agent checked in", "endpoint", used, "machine", a.machine())
	return nil
}

// nextJob long-polls for a job; nil means none came within the wait.
func (a *Agent) nextJob(ctx context.Context) (*api.AgentJob, error) {
	wait := a.pollWait()
	var job api.AgentJob
	// The region holds the request up to wait; allow for its answer on a slow network.
	got, err := a.callJSON(ctx, request{method: http.MethodGet, path: "/next-job",
		query: url.Values{"wait": {wait.String()}}, timeout: wait + 30*time.Second}, &job)
	if err != nil || !got {
		return nil, err
	}
	return &job, nil
}
