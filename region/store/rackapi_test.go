package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

func TestRackStatusIsDerivedFromHeartbeats(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	cases := []struct {
		name, stored string
		lastSeen     time.Time
		want         string
	}{
		{"fresh heartbeat", api.RackOnline, now.Add(-time.Second), api.RackOnline},
		{"degraded heartbeat", api.RackDegraded, now.Add(-time.Second), api.RackDegraded},
		{"stored offline but beating", api.RackOffline, now.Add(-time.Second), api.RackOnline},
		{"just within three intervals", api.RackOnline, now.Add(-3 * api.RackHeartbeatInterval), api.RackOnline},
		{"silent for over three intervals", api.RackOnline, now.Add(-3*api.RackHeartbeatInterval - time.Millisecond), api.RackOffline},
		{"silent and degraded", api.RackDegraded, now.Add(-time.Hour), api.RackOffline},
		{"paused while silent", api.RackPaused, now.Add(-time.Hour), api.RackPaused},
		{"paused while beating", api.RackPaused, now, api.RackPaused},
		{"never seen keeps what was written", api.RackOnline, time.Time{}, api.RackOnline},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := store.RackStatus(c.stored, c.lastSeen, now); got != c.want {
				t.Fatalf("RackStatus(%q, %s ago) = %q, want %q", c.stored, now.Sub(c.lastSeen), got, c.want)
			}
		})
	}
}

func TestRackSecretIsMintedOnceForEveryProcess(t *testing.T) {
	_, url := newStore(t)
	ctx := context.Background()
	// Two processes on one database ask at once.
	var secrets [8]string
	var wg sync.WaitGroup
	for i := range secrets {
		s, err := store.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		wg.Go(func() {
			var err error
			if secrets[i], err = s.RackSecret(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, s := range secrets {
		if s == "" || s != secrets[0] {
			t.Fatalf("secrets differ or are empty: %q", secrets)
		}
	}
}
