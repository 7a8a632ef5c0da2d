package regionlink

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/rack/regionlink/regionlinktest"
)

// rackConfig stands in for the rack config type the region side defines.
type rackConfig struct {
	Subnets []string `json:"Subnets"`
}

// applied records what OnConfig accepted; it rejects configs without subnets.
type applied struct{ configs []rackConfig }

func (a *applied) onConfig(raw json.RawMessage) error {
	var c rackConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		return err
	}
	if len(c.Subnets) == 0 {
		return errors.New("no subnets")
	}
	a.configs = append(a.configs, c)
	return nil
}

func newConfigLink(t *testing.T, dir string, a *applied, endpoints ...string) (*Link, error) {
	t.Helper()
	return New(Config{Endpoints: endpoints, StateDir: dir, ConfigPath: regionlinktest.ConfigPath,
		OnConfig: a.onConfig, Logger: slog.New(slog.DiscardHandler)})
}

func TestSyncConfigChangeDetection(t *testing.T) {
	for _, etag := range []bool{true, false} {
		name := map[bool]string{true: "ETag", false: "content hash"}[etag]
		t.Run(name, func(t *testing.T) {
			r := regionlinktest.Start(t, "a")
			dir := t.TempDir()
			var got applied
			l, err := newConfigLink(t, dir, &got, r.URL)
			if err != nil {
				t.Fatal(err)
			}
			steps := []struct {
				config      string
				wantChanged bool
				wantErr     bool
			}{
				{`{"Subnets": ["10.0.0.0/24"]}`, true, false},
				{`{"Subnets": ["10.0.0.0/24"]}`, false, false},
				{`{"Subnets": ["10.0.0.0/24", "10.0.1.0/24"]}`, true, false},
				{`{"Subnets": [`, false, true},   // not JSON
				{`{"Subnets": []}`, false, true}, // OnConfig rejects it
			}
			for i, s := range steps {
				r.SetConfig(s.config, etag)
				changed, err := l.SyncConfig(context.Background())
				if changed != s.wantChanged || (err != nil) != s.wantErr {
					t.Fatalf("step %d: changed=%v err=%v, want changed=%v err=%v", i, changed, err, s.wantChanged, s.wantErr)
				}
			}
			if len(got.configs) != 2 || len(got.configs[1].Subnets) != 2 {
				t.Fatalf("OnConfig applied %+v, want the two valid distinct configs", got.configs)
			}
			if _, notModified := r.ConfigFetches(); etag && notModified != 1 {
				t.Fatalf("304 answers = %d, want 1", notModified)
			}
			raw, ok := l.Config()
			var inForce rackConfig
			if !ok || json.Unmarshal(raw, &inForce) != nil || len(inForce.Subnets) != 2 {
				t.Fatalf("config in force %s, want the last valid one", raw)
			}
		})
	}
}

func TestCachedConfigWithEveryRegionDown(t *testing.T) {
	a, b := regionlinktest.Start(t, "a"), regionlinktest.Start(t, "b")
	a.SetConfig(`{"Subnets": ["192.168.1.0/24"]}`, true)
	dir := t.TempDir()
	var first applied
	l, err := newConfigLink(t, dir, &first, a.URL, b.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.SyncConfig(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.Close()
	b.Close()

	var second applied
	restarted, err := newConfigLink(t, dir, &second, a.URL, b.URL)
	if err != nil {
		t.Fatal(err)
	}
	if len(second.configs) != 1 || second.configs[0].Subnets[0] != "192.168.1.0/24" {
		t.Fatalf("restarted rack applied %+v, want the cached config", second.configs)
	}
	if _, err := restarted.SyncConfig(context.Background()); err == nil {
		t.Fatal("SyncConfig succeeded with every region down")
	}
	if raw, ok := restarted.Config(); !ok || len(raw) == 0 {
		t.Fatal("cached config dropped after a failed sync")
	}

	// The region comes back with the same config: nothing is re-applied.
	a.Restart()
	if changed, err := restarted.SyncConfig(context.Background()); err != nil || changed {
		t.Fatalf("sync after restart: changed=%v err=%v, want unchanged", changed, err)
	}
	if len(second.configs) != 1 {
		t.Fatalf("unchanged config applied again: %+v", second.configs)
	}
}

func TestCorruptConfigCacheIsAnError(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, configFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := newConfigLink(t, dir, &applied{}, "http://127.0.0.1:1"); err == nil {
		t.Fatal("New accepted a corrupt config cache")
	}
}

// TestServeFollowsConfigByLongPoll: with health rounds an hour apart, a changed config still
// reaches the rack at once, through the long poll the region holds open until it changes.
func TestServeFollowsConfigByLongPoll(t *testing.T) {
	r := regionlinktest.Start(t, "a")
	r.SetConfig(`{"Subnets": ["10.0.0.0/24"]}`, true)
	var got applied
	var mu sync.Mutex
	l, err := New(Config{Endpoints: []string{r.URL}, StateDir: t.TempDir(), ConfigPath: regionlinktest.ConfigPath,
		Interval: time.Hour, ConfigWait: 30 * time.Second, Logger: slog.New(slog.DiscardHandler),
		OnConfig: func(raw json.RawMessage) error {
			mu.Lock()
			defer mu.Unlock()
			return got.onConfig(raw)
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	applies := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(got.configs)
	}
	testutil.Eventually(t, 10*time.Second, "the first config applied", func() bool { return applies() == 1 })
	// The poll after a change comes a second later; without a long poll it would be answered
	// 304 at once and the next one an hour later.
	testutil.Eventually(t, 10*time.Second, "the next poll", func() bool { total, _ := r.ConfigFetches(); return total == 2 })
	r.SetConfig(`{"Subnets": ["10.0.0.0/24", "10.0.1.0/24"]}`, true)
	testutil.Eventually(t, 10*time.Second, "the changed config applied", func() bool { return applies() == 2 })
	if total, _ := r.ConfigFetches(); total > 3 {
		t.Errorf("%d config fetches for one change, want at most 3 (long polls, not polling)", total)
	}
}
