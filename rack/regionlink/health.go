package regionlink

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/ironflow/ironflow/region/api"
)

// Serve runs health checks and endpoint discovery every Interval, and follows the config with
// long polls, until ctx ends.
func (l *Link) Serve(ctx context.Context) error {
	if l.cfg.ConfigPath != "" {
		var wg sync.WaitGroup
		defer wg.Wait()
		wg.Go(func() { l.followConfig(ctx) })
	}
	t := time.NewTicker(l.cfg.Interval)
	defer t.Stop()
	for {
		l.refresh(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// refresh is one round: check every endpoint, learn the cluster from the current one.
func (l *Link) refresh(ctx context.Context) {
	l.checkAll(ctx)
	if err := l.learn(ctx); err != nil {
		l.log.Debug("region info not refreshed", "error", err)
	}
}

// checkAll probes GET /healthz on every endpoint concurrently and records the results.
func (l *Link) checkAll(ctx context.Context) {
	var wg sync.WaitGroup
	for _, u := range l.attemptOrder() {
		wg.Go(func() {
			err := l.check(ctx, u)
			if ctx.Err() != nil {
				return // shutting down: not the region's fault
			}
			if err != nil {
				l.log.Debug("region health check failed", "endpoint", u.String(), "error", err)
			}
			l.recordResult(u.String(), err == nil)
		})
	}
	wg.Wait()
}

func (l *Link) check(ctx context.Context, base *url.URL) error {
	resp, err := l.get(ctx, base, "/healthz")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthz: %s", resp.Status)
	}
	return nil
}

// get sends a bounded GET for path to one endpoint.
func (l *Link) get(ctx context.Context, base *url.URL, path string) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.CheckTimeout)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, resolve(base, &url.URL{Path: path}).String(), nil)
	if err != nil {
		cancel()
		return nil, err
	}
	resp, err := l.transport.RoundTrip(req)
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	defer c.cancel()
	return c.ReadCloser.Close()
}

// learn reads /api/v1/info from the current endpoint and persists the cluster's endpoints when
// they changed.
func (l *Link) learn(ctx context.Context) error {
	base := l.Current()
	resp, err := l.get(ctx, base, api.PathPrefix+"/info")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("info from %s: %s", base, resp.Status)
	}
	var info api.Info
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&info); err != nil {
		return fmt.Errorf("info from %s: %w", base, err)
	}
	learned, err := normalizeEndpoints(slices.DeleteFunc(append([]string{info.URL}, info.Endpoints...),
		func(s string) bool { return s == "" }))
	if err != nil {
		return fmt.Errorf("info from %s: %w", base, err)
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if l.urls[base.String()] == nil {
		return nil // endpoints swapped while we asked
	}
	if slices.Equal(learned, l.learned) {
		return nil
	}
	if err := l.persistState(state{Configured: l.seeds, Learned: learned}); err != nil {
		return err
	}
	l.log.Info("learned region endpoints", "region", info.Name, "endpoints", learned)
	l.setEndpoints(l.seeds, learned, false)
	return nil
}
