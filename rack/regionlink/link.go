// Package regionlink keeps a rack connected to its region: several region endpoints with health
// checks and failover, the cluster's endpoint list learned from /api/v1/info and persisted, a
// failover-aware Do for proxying, and the rack config fetched with change detection and cached
// on disk so a restarted rack serves with no region reachable.
package regionlink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ironflow/ironflow/internal/atomicfile"
)

// Config configures a Link. Zero values of the tunables get the defaults noted.
type Config struct {
	// Endpoints are region URLs, preferred first. They are used only when StateDir holds no
	// persisted list: after a SwapEndpoints (a rack moved region) the persisted list wins.
	Endpoints []string
	// StateDir holds the persisted endpoint list and the config cache.
	StateDir string
	// FailAfter is how many consecutive failures make an endpoint unhealthy (default 3).
	FailAfter int
	// Interval is the time between health-check rounds (default 5s).
	Interval time.Duration
	// CheckTimeout bounds one health check or info fetch (default 2s).
	CheckTimeout time.Duration
	// ConfigPath is the region path of the rack config, e.g. /api/v1/racks/{uuid}/config.
	// Empty disables config sync.
	ConfigPath string
	// ConfigWait is how long a config poll asks the region to wait for a change before it
	// answers 304 (default 25s; the region allows at most a minute).
	ConfigWait time.Duration
	// OnConfig decodes and applies a config payload; an error rejects the payload and the
	// previous config stays in force. Called with the cached config by New.
	OnConfig func(json.RawMessage) error
	// Token, when set, is sent as "Authorization: Bearer" on the link's own config fetch.
	Token string
	// Transport carries every request (default: a clone of http.DefaultTransport).
	Transport http.RoundTripper
	Logger    *slog.Logger
}

// Link is the rack's view of its region. Safe for concurrent use.
type Link struct {
	cfg       Config
	transport http.RoundTripper
	log       *slog.Logger

	mu      sync.Mutex
	seeds   []string            // configured or swapped endpoints, preferred first
	learned []string            // cluster endpoints from /api/v1/info
	order   []string            // seeds then learned, without duplicates
	urls    map[string]*url.URL // parsed order entries
	fails   map[string]int      // consecutive failures per endpoint
	current string
	// cancelPoll ends the config long poll in flight, which SwapEndpoints makes stale.
	cancelPoll context.CancelFunc

	epoch  atomic.Int64 // counts SwapEndpoints, so a config answer of the old region is dropped
	cfgMu  sync.Mutex   // serialises applying configs
	config cachedConfig
}

// state is the persisted endpoint list.
type state struct {
	Configured []string `json:"Configured"`
	Learned    []string `json:"Learned"`
}

const stateFile = "endpoints.json"

// New builds a Link from cfg, the persisted endpoint list and the cached config.
func New(cfg Config) (*Link, error) {
	if cfg.StateDir == "" {
		return nil, errors.New("regionlink: a state directory is required")
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("regionlink: state dir: %w", err)
	}
	if cfg.FailAfter <= 0 {
		cfg.FailAfter = 3
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Second
	}
	if cfg.CheckTimeout <= 0 {
		cfg.CheckTimeout = 2 * time.Second
	}
	if cfg.ConfigWait <= 0 {
		cfg.ConfigWait = 25 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	l := &Link{cfg: cfg, transport: cfg.Transport, log: cfg.Logger.With("component", "regionlink")}
	if l.transport == nil {
		l.transport = http.DefaultTransport.(*http.Transport).Clone()
	}

	st, err := loadState(filepath.Join(cfg.StateDir, stateFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		seeds, err := normalizeEndpoints(cfg.Endpoints)
		if err != nil {
			return nil, fmt.Errorf("regionlink: %w", err)
		}
		if len(seeds) == 0 {
			return nil, errors.New("regionlink: no region endpoints configured or persisted")
		}
		st = state{Configured: seeds}
	case err != nil:
		return nil, fmt.Errorf("regionlink: %w", err)
	default:
		l.log.Info("using persisted region endpoints", "configured", st.Configured, "learned", st.Learned)
	}
	l.setEndpoints(st.Configured, st.Learned, true)

	if err := l.loadConfigCache(); err != nil {
		return nil, err
	}
	return l, nil
}

func loadState(path string) (state, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return state{}, err
	}
	var st state
	if err := json.Unmarshal(data, &st); err != nil {
		return state{}, fmt.Errorf("persisted endpoints %s: %w", path, err)
	}
	if st.Configured, err = normalizeEndpoints(st.Configured); err != nil {
		return state{}, fmt.Errorf("persisted endpoints %s: %w", path, err)
	}
	if st.Learned, err = normalizeEndpoints(st.Learned); err != nil {
		return state{}, fmt.Errorf("persisted endpoints %s: %w", path, err)
	}
	if len(st.Configured)+len(st.Learned) == 0 {
		return state{}, fmt.Errorf("persisted endpoints %s: empty list", path)
	}
	return st, nil
}

func (l *Link) persistState(st state) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode endpoints: %w", err)
	}
	return atomicfile.Write(filepath.Join(l.cfg.StateDir, stateFile), data)
}

// normalizeEndpoints parses region URLs, drops duplicates and trailing slashes, and refuses
// anything that is not an absolute http(s) URL without query or fragment.
func normalizeEndpoints(raw []string) ([]string, error) {
	var out []string
	for _, s := range raw {
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("region endpoint %q: %w", s, err)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return nil, fmt.Errorf("region endpoint %q: want http(s)://host[:port][/path]", s)
		}
		u.Path = strings.TrimSuffix(u.Path, "/")
		u.RawPath = ""
		if n := u.String(); !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// setEndpoints installs a new endpoint list. reset forgets health history (a new region);
// otherwise endpoints that stay keep their failure counts.
func (l *Link) setEndpoints(seeds, learned []string, reset bool) {
	order := slices.Clone(seeds)
	for _, e := range learned {
		if !slices.Contains(order, e) {
			order = append(order, e)
		}
	}
	urls := make(map[string]*url.URL, len(order))
	fails := make(map[string]int, len(order))
	for _, e := range order {
		urls[e], _ = url.Parse(e) // validated by normalizeEndpoints
		if !reset {
			fails[e] = l.fails[e]
		}
	}
	l.seeds, l.learned, l.order, l.urls, l.fails = seeds, learned, order, urls, fails
	if reset || !slices.Contains(order, l.current) {
		l.current = order[0]
	}
	l.reselect()
}

// reselect makes the most preferred healthy endpoint current; with none healthy it keeps the
// current one (Do still tries them all).
func (l *Link) reselect() {
	for _, e := range l.order {
		if l.fails[e] < l.cfg.FailAfter {
			if e != l.current {
				l.log.Warn("region endpoint switched", "from", l.current, "to", e)
				l.current = e
			}
			return
		}
	}
}

// Current is the endpoint requests go to first.
func (l *Link) Current() *url.URL {
	l.mu.Lock()
	defer l.mu.Unlock()
	u := *l.urls[l.current]
	return &u
}

// Endpoints lists every known endpoint, preferred first.
func (l *Link) Endpoints() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.order)
}

// SwapEndpoints replaces the whole endpoint list (the rack moved to another region) and
// persists it. Requests in flight finish against the old region; new ones use the new list.
// Invalid input returns an error and changes nothing.
func (l *Link) SwapEndpoints(urls []string) error {
	seeds, err := normalizeEndpoints(urls)
	if err != nil {
		return fmt.Errorf("swap endpoints: %w", err)
	}
	if len(seeds) == 0 {
		return errors.New("swap endpoints: empty list")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.persistState(state{Configured: seeds}); err != nil {
		return fmt.Errorf("swap endpoints: %w", err)
	}
	l.log.Info("region endpoints swapped", "from", l.order, "to", seeds)
	l.setEndpoints(seeds, nil, true)
	l.epoch.Add(1)
	if l.cancelPoll != nil {
		l.cancelPoll()
	}
	return nil
}

// recordResult updates an endpoint's failure count and the current endpoint.
func (l *Link) recordResult(endpoint string, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, known := l.urls[endpoint]; !known {
		return // swapped out meanwhile
	}
	before := l.fails[endpoint]
	if ok {
		l.fails[endpoint] = 0
		if before >= l.cfg.FailAfter {
			l.log.Info("region endpoint healthy again", "endpoint", endpoint)
		}
	} else {
		l.fails[endpoint] = before + 1
		if before+1 == l.cfg.FailAfter {
			l.log.Warn("region endpoint unhealthy", "endpoint", endpoint, "failures", before+1)
		}
	}
	l.reselect()
}

// attemptOrder is the current endpoint, then the others in preference order.
func (l *Link) attemptOrder() []*url.URL {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := []*url.URL{l.urls[l.current]}
	for _, e := range l.order {
		if e != l.current {
			out = append(out, l.urls[e])
		}
	}
	return out
}
