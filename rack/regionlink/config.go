package regionlink

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/ironflow/ironflow/internal/atomicfile"
	"github.com/ironflow/ironflow/region/client"
)

const (
	configFile = "config.json"
	// minConfigSpacing is the least time between config polls after a change.
	minConfigSpacing = time.Second
	// longPollSlack is how long past its wait a long poll may take before the rack gives up on
	// it (a region host that vanished without closing the connection).
	longPollSlack = 15 * time.Second
)

// cachedConfig is the last accepted rack config, as held in memory and on disk.
type cachedConfig struct {
	ETag   string          `json:"ETag"`
	Config json.RawMessage `json:"Config"`
	hash   [sha256.Size]byte
}

// loadConfigCache applies the config cached on disk, so a rack restarted with every region
// down serves what it served before.
func (l *Link) loadConfigCache() error {
	path := filepath.Join(l.cfg.StateDir, configFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("regionlink: config cache: %w", err)
	}
	var c cachedConfig
	if err := json.Unmarshal(data, &c); err != nil {
		return fmt.Errorf("regionlink: config cache %s: %w", path, err)
	}
	if l.cfg.OnConfig != nil {
		if err := l.cfg.OnConfig(c.Config); err != nil {
			return fmt.Errorf("regionlink: cached config %s rejected: %w", path, err)
		}
	}
	c.hash = configHash(c.Config)
	l.config = c
	l.log.Info("serving cached rack config", "etag", c.ETag, "bytes", len(c.Config))
	return nil
}

// Config returns the config in force and whether there is one.
func (l *Link) Config() (json.RawMessage, bool) {
	l.cfgMu.Lock()
	defer l.cfgMu.Unlock()
	return bytes.Clone(l.config.Config), l.config.Config != nil
}

// SyncConfig fetches ConfigPath (with failover) and, when it changed, applies it through
// OnConfig and caches it on disk. Change detection uses If-None-Match with the last ETag and,
// for regions that send no ETag, a SHA-256 of the payload. A payload that is not JSON or that
// OnConfig rejects returns an error and leaves the config in force untouched.
func (l *Link) SyncConfig(ctx context.Context) (changed bool, err error) {
	return l.syncConfig(ctx, 0)
}

// syncConfig is SyncConfig asking the region to hold the request up to wait for a change (a
// long poll). The request runs unlocked, so a long poll does not hold up other syncs; its
// answer is dropped when the endpoints were swapped meanwhile (it is the old region's).
func (l *Link) syncConfig(ctx context.Context, wait time.Duration) (changed bool, err error) {
	if l.cfg.ConfigPath == "" {
		return false, errors.New("regionlink: no config path configured")
	}
	l.cfgMu.Lock()
	known := l.config.ETag
	l.cfgMu.Unlock()
	epoch := l.epoch.Load()

	req := client.Request{Method: http.MethodGet, Path: l.cfg.ConfigPath}
	if wait > 0 {
		req.Query = url.Values{"wait": {wait.String()}}
	}
	if known != "" {
		req.Header = http.Header{"If-None-Match": {known}}
	}
	answer, err := client.New("", l.cfg.Token, client.WithDoer(l)).Do(ctx, req)
	if err != nil {
		return false, fmt.Errorf("fetch rack config: %w", err)
	}
	body := answer.Body
	switch {
	case answer.StatusCode == http.StatusNotModified:
		return false, nil
	case !json.Valid(body):
		return false, errors.New("fetch rack config: payload is not valid JSON")
	}

	l.cfgMu.Lock()
	defer l.cfgMu.Unlock()
	if l.epoch.Load() != epoch {
		return false, errors.New("fetch rack config: the region endpoints were swapped meanwhile; answer dropped")
	}
	next := cachedConfig{ETag: answer.Header.Get("ETag"), Config: body, hash: configHash(body)}
	if l.config.Config != nil && next.hash == l.config.hash {
		if next.ETag != l.config.ETag {
			l.config.ETag = next.ETag
			return false, l.persistConfig()
		}
		return false, nil
	}
	if l.cfg.OnConfig != nil {
		if err := l.cfg.OnConfig(body); err != nil {
			return false, fmt.Errorf("rack config rejected: %w", err)
		}
	}
	l.config = next
	l.log.Info("rack config updated", "etag", next.ETag, "bytes", len(body))
	return true, l.persistConfig()
}

// followConfig keeps the config current until ctx ends: long polls that the region answers
// when the config changes. Polls start at least minConfigSpacing apart after a change (a burst
// of changes is applied at most once a second) and Interval apart after a failure or an answer
// that did not wait (a region without long polls, or one whose places for this rack are
// taken); a poll cut short by SwapEndpoints is sent again at once, to the new region.
func (l *Link) followConfig(ctx context.Context) {
	for {
		start := time.Now()
		pollCtx, cancel := context.WithTimeout(ctx, l.cfg.ConfigWait+longPollSlack)
		swapped := l.onSwap(cancel)
		changed, err := l.syncConfig(pollCtx, l.cfg.ConfigWait)
		cancel()
		if ctx.Err() != nil {
			return
		}
		next := l.cfg.Interval
		switch {
		case swapped():
			next = 0
		case err != nil:
			l.log.Warn("rack config not refreshed; serving the cached one", "error", err)
		case changed:
			next = minConfigSpacing
		}
		t := time.NewTimer(time.Until(start.Add(next)))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// onSwap makes SwapEndpoints call cancel, until the next onSwap; the func it returns says
// whether a swap happened since.
func (l *Link) onSwap(cancel context.CancelFunc) func() bool {
	epoch := l.epoch.Load()
	l.mu.Lock()
	l.cancelPoll = cancel
	l.mu.Unlock()
	return func() bool { return l.epoch.Load() != epoch }
}

// configHash hashes the compact form, which is what the cache file holds (json.Marshal compacts
// a RawMessage), so a payload compares equal to its cached copy after a restart.
func configHash(raw json.RawMessage) [sha256.Size]byte {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return sha256.Sum256(raw)
	}
	return sha256.Sum256(b.Bytes())
}

func (l *Link) persistConfig() error {
	data, err := json.Marshal(l.config)
	if err != nil {
		return fmt.Errorf("encode config cache: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(l.cfg.StateDir, configFile), data); err != nil {
		return fmt.Errorf("config cache: %w", err)
	}
	return nil
}
