package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

const (
	// maxConfigWaiters bounds the long polls one rack may have waiting; a poll past it is
	// answered at once.
	maxConfigWaiters = 2
	// revisionPollInterval is how often a region process reads the config revision while
	// long polls wait: one query for all of them.
	revisionPollInterval = 250 * time.Millisecond
)

// rackConfig answers with the rack's config and an ETag (a hash of the body); a request whose
// If-None-Match holds that ETag gets 304 Not Modified, after waiting up to the wait parameter
// for the config to change (a long poll).
func (s *Server) rackConfig(w http.ResponseWriter, r *http.Request, c *call) error {
	id, err := ownRack(r, c)
	if err != nil {
		return err
	}
	wait, err := waitParam(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	// The config names the region (RackDNS.Region) from its stored identity: make sure it is
	// stored (run.go does at start; a server started otherwise may not have yet).
	if _, err := s.identity(ctx); err != nil {
		return err
	}
	cur, err := s.configs.get(ctx, id)
	if err != nil {
		return err
	}
	known := r.Header.Get("If-None-Match")
	if etagMatches(known, cur.etag) && wait > 0 && s.configs.reserveWaiter(id) {
		s.metrics.configWaiting.Inc()
		defer s.metrics.configWaiting.Dec()
		defer s.configs.releaseWaiter(id)
		if err := extendDeadlines(w, wait+pollSlack); err != nil {
			return fmt.Errorf("extend the long poll's deadlines: %w", err)
		}
		if cur, err = s.configs.awaitChange(ctx, id, cur, known, time.Now().Add(wait)); err != nil {
			return err
		}
	}
	w.Header().Set("ETag", cur.etag)
	if etagMatches(known, cur.etag) {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(cur.body)
	return nil
}

// etagMatches applies If-None-Match (RFC 9110 13.1.2, weak comparison) to etag.
func etagMatches(header, etag string) bool {
	for tag := range strings.SplitSeq(header, ",") {
		tag = strings.TrimSpace(tag)
		if tag == "*" || strings.TrimPrefix(tag, "W/") == etag {
			return true
		}
	}
	return false
}

// renderedConfig is one rack's config as served: the body, its ETag and what it was built from.
type renderedConfig struct {
	rev    store.RackConfigRevision
	cfg    api.RackConfig
	leases []byte // cfg.Leases encoded, to tell whether a refresh changed them
	body   []byte
	etag   string
	// expires is when the first lease of the config expires, so it must be read again.
	expires time.Time
}

// configCache holds each rack's rendered config by revision: a poll at an unchanged revision
// costs one query, a change of leases alone re-reads only the leases, and anything else
// rebuilds the config.
type configCache struct {
	st    *store.Store
	watch *revisionWatch

	mu    sync.Mutex
	racks map[string]*rackEntry
}

type rackEntry struct {
	build   sync.Mutex // one build at a time per rack
	cur     *renderedConfig
	waiters int // guarded by configCache.mu
}

func newConfigCache(st *store.Store) *configCache {
	return &configCache{st: st, watch: &revisionWatch{st: st, moved: make(chan struct{})}, racks: map[string]*rackEntry{}}
}

func (c *configCache) entry(rack string) *rackEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.racks[rack]
	if e == nil {
		e = &rackEntry{}
		c.racks[rack] = e
	}
	return e
}

// get returns the rack's config at the current revision.
func (c *configCache) get(ctx context.Context, rack string) (*renderedConfig, error) {
	e := c.entry(rack)
	e.build.Lock()
	defer e.build.Unlock()
	rev, err := c.st.RackConfigRevision(ctx)
	if err != nil {
		return nil, err
	}
	old := e.cur
	switch {
	case old != nil && rev.Revision == old.rev.Revision && time.Now().Before(old.expires):
		return old, nil
	case old != nil && rev.Static <= old.rev.Revision:
		e.cur, err = c.refreshLeases(ctx, rack, old)
	default:
		e.cur, err = c.build(ctx, rack)
	}
	if errors.Is(err, store.ErrNotFound) {
		c.forget(rack)
	}
	if err != nil {
		return nil, err
	}
	return e.cur, nil
}

func (c *configCache) forget(rack string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.racks[rack]; e != nil && e.waiters == 0 {
		delete(c.racks, rack)
	}
}

func (c *configCache) build(ctx context.Context, rack string) (*renderedConfig, error) {
	cfg, rev, err := c.st.RackConfig(ctx, rack)
	if err != nil {
		return nil, err
	}
	return render(cfg, rev)
}

// refreshLeases re-reads the leases of old, whose other sections are current up to the
// revision read with them; it rebuilds when something else changed meanwhile.
func (c *configCache) refreshLeases(ctx context.Context, rack string, old *renderedConfig) (*renderedConfig, error) {
	subnets := make([]string, len(old.cfg.Subnets))
	for i, s := range old.cfg.Subnets {
		subnets[i] = s.Uuid
	}
	ls, dns, rev, err := c.st.ConfigLeases(ctx, rack, subnets)
	if err != nil {
		return nil, err
	}
	if rev.Static > old.rev.Revision {
		return c.build(ctx, rack)
	}
	encoded, err := json.Marshal(ls)
	if err != nil {
		return nil, fmt.Errorf("encode rack config leases: %w", err)
	}
	if bytes.Equal(encoded, old.leases) && dns.Serial == old.cfg.DNS.Serial {
		next := *old
		next.rev, next.expires = rev, firstExpiry(ls)
		return &next, nil
	}
	cfg := old.cfg
	cfg.Leases, cfg.DNS = ls, dns
	return render(cfg, rev)
}

func render(cfg api.RackConfig, rev store.RackConfigRevision) (*renderedConfig, error) {
	leases, err := json.Marshal(cfg.Leases)
	if err != nil {
		return nil, fmt.Errorf("encode rack config leases: %w", err)
	}
	body, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encode rack config: %w", err)
	}
	sum := sha256.Sum256(body)
	return &renderedConfig{rev: rev, cfg: cfg, leases: leases, body: append(body, '\n'),
		etag: `"` + hex.EncodeToString(sum[:16]) + `"`, expires: firstExpiry(cfg.Leases)}, nil
}

// firstExpiry is when the first of ls expires; far in the future without leases.
func firstExpiry(ls []api.Lease) time.Time {
	first := time.Now().Add(24 * time.Hour)
	for _, l := range ls {
		if l.Expires.Before(first) {
			first = l.Expires
		}
	}
	return first
}

// reserveWaiter takes one of the rack's long-poll places, if one is free.
func (c *configCache) reserveWaiter(rack string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.racks[rack]
	if e == nil || e.waiters >= maxConfigWaiters {
		return false
	}
	e.waiters++
	return true
}

func (c *configCache) releaseWaiter(rack string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.racks[rack]; e != nil {
		e.waiters--
	}
}

// awaitChange waits until the rack's config no longer matches the If-None-Match header known,
// deadline passes or ctx ends, and returns the config then.
func (c *configCache) awaitChange(ctx context.Context, rack string, cur *renderedConfig, known string, deadline time.Time) (*renderedConfig, error) {
	for etagMatches(known, cur.etag) {
		moved, done := c.watch.after(cur.rev.Revision)
		t := time.NewTimer(min(time.Until(deadline), time.Until(cur.expires)))
		select {
		case <-ctx.Done(): // the rack went away, or the server is shutting down
		case <-t.C:
		case <-moved:
		}
		t.Stop()
		done()
		if ctx.Err() != nil || !time.Now().Before(deadline) {
			return cur, nil
		}
		var err error
		if cur, err = c.get(ctx, rack); err != nil {
			return nil, err
		}
	}
	return cur, nil
}

// revisionWatch tells long polls when the config revision moves past the one they hold. While
// any wait, one goroutine reads the revision every revisionPollInterval.
type revisionWatch struct {
	st *store.Store

	mu      sync.Mutex
	latest  int64
	moved   chan struct{} // closed when latest moves on, then replaced
	waiters int
	running bool
}

// after returns a channel closed once the revision is past rev, and the func to call when
// done waiting.
func (w *revisionWatch) after(rev int64) (<-chan struct{}, func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.latest > rev {
		closed := make(chan struct{})
		close(closed)
		return closed, func() {}
	}
	w.waiters++
	if !w.running {
		w.running = true
		go w.run()
	}
	return w.moved, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.waiters--
	}
}

func (w *revisionWatch) run() {
	t := time.NewTicker(revisionPollInterval)
	defer t.Stop()
	for range t.C {
		w.mu.Lock()
		if w.waiters == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), revisionPollInterval*4)
		rev, err := w.st.RackConfigRevision(ctx)
		cancel()
		if err != nil {
			continue // the waiters' own deadlines end them
		}
		w.mu.Lock()
		if rev.Revision > w.latest {
			w.latest = rev.Revision
			close(w.moved)
			w.moved = make(chan struct{})
		}
		w.mu.Unlock()
	}
}
