package regionlink

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/ironflow/ironflow/region/client"
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
	return l.endpointClient(base).Health(ctx)
}

// endpointClient calls the one endpoint base, each call bounded by CheckTimeout.
func (l *Link) endpointClient(base *url.URL) *client.Client {
	return client.New(base.String(), "", client.WithHTTPClient(&http.Client{Transport: l.transport}),
		client.WithTimeout(l.cfg.CheckTimeout))
}

// learn reads /api/v1/info from the current endpoint and persists the cluster's endpoints when
// they changed.
func (l *Link) learn(ctx context.Context) error {
	base := l.Current()
	info, err := l.endpointClient(base).Info(ctx)
	if err != nil {
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
