package leases

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/ironflow/ironflow/region/api"
)

// flakyRegion fails its first calls, then records what it receives.
type flakyRegion struct {
	mu       sync.Mutex
	failures int
	calls    int
	batches  [][]api.Lease
	latest   map[string]api.Lease
	got      chan struct{}
}

func (r *flakyRegion) SyncLeases(ctx context.Context, leases []api.Lease) (api.LeaseSyncResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.calls <= r.failures {
		return api.LeaseSyncResult{}, errors.New("region unreachable")
	}
	r.batches = append(r.batches, leases)
	for _, l := range leases {
		r.latest[l.Addr] = l
	}
	select {
	case r.got <- struct{}{}:
	default:
	}
	return api.LeaseSyncResult{Stored: len(leases)}, nil
}

func (r *flakyRegion) snapshot() (map[string]api.Lease, [][]api.Lease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := make(map[string]api.Lease, len(r.latest))
	for k, v := range r.latest {
		m[k] = v
	}
	return m, append([][]api.Lease(nil), r.batches...)
}

func TestUploaderBatchesAndRetries(t *testing.T) {
	tb := openTable(t, t.TempDir(), newClock(), bigPool())
	region := &flakyRegion{failures: 3, latest: map[string]api.Lease{}, got: make(chan struct{}, 1)}
	up, err := NewUploader(tb, region, UploaderOptions{BatchSize: 10, Interval: time.Millisecond, RetryDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- up.Serve(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()

	var released Lease
	for i := range 25 { // granted while the region fails: the rack keeps serving
		l := grant(t, tb, mac(i))
		if i == 7 {
			released = l
		}
	}
	if err := tb.Release(subnetID, mac(7), released.Addr); err != nil {
		t.Fatal(err)
	}
	want := tb.Export()

	wantByAddr := map[string]api.Lease{}
	for _, l := range want {
		wantByAddr[l.Addr] = l
	}
	deadline := time.After(10 * time.Second)
	for {
		latest, batches := region.snapshot()
		if reflect.DeepEqual(latest, wantByAddr) {
			for _, b := range batches {
				if len(b) > 10 {
					t.Errorf("batch of %d leases, limit 10", len(b))
				}
			}
			return
		}
		select {
		case <-region.got:
		case <-deadline:
			t.Fatalf("region never converged to the table: has %d leases (.7 as %q), want %d",
				len(latest), latest[released.Addr.String()].State, len(want))
		}
	}
}

func TestReopenQueuesLeasesForUpload(t *testing.T) {
	dir := t.TempDir()
	c := newClock()
	tb := openTable(t, dir, c, bigPool())
	grant(t, tb, mac(1))
	grant(t, tb, mac(2))
	tb.Close()
	again := openTable(t, dir, c, bigPool())
	if _, leases := again.takeDirty(100); len(leases) != 2 {
		t.Fatalf("%d leases queued after reopen, want 2", len(leases))
	}
}
