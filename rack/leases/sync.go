package leases

import (
	"context"
	"log/slog"
	"net/netip"
	"time"

	"github.com/ironflow/ironflow/region/api"
)

// Syncer sends leases to the region (implemented by the region link).
type Syncer interface {
	SyncLeases(ctx context.Context, leases []api.Lease) error
}

// Uploader sends changed leases to the region in batches. The table keeps serving while
// the region is unreachable; changes accumulate (one entry per address) and are retried.
type Uploader struct {
	table    *Table
	syncer   Syncer
	batch    int
	interval time.Duration // how long changes are gathered before a send
	retry    time.Duration // first retry delay; doubles up to maxRetry
	maxRetry time.Duration
	log      *slog.Logger
}

// UploaderOptions tune an Uploader; zero values take the defaults.
type UploaderOptions struct {
	BatchSize  int           // leases per SyncLeases call (default 500)
	Interval   time.Duration // gathering delay after a change (default 1s)
	RetryDelay time.Duration // first retry delay after a failure (default 1s, doubling to 1m)
	Logger     *slog.Logger
}

// NewUploader returns an uploader of t's changes to s.
func NewUploader(t *Table, s Syncer, o UploaderOptions) *Uploader {
	u := &Uploader{table: t, syncer: s, batch: o.BatchSize, interval: o.Interval, retry: o.RetryDelay, maxRetry: time.Minute, log: o.Logger}
	if u.batch <= 0 {
		u.batch = 500
	}
	if u.interval <= 0 {
		u.interval = time.Second
	}
	if u.retry <= 0 {
		u.retry = time.Second
	}
	u.maxRetry = max(u.maxRetry, u.retry)
	if u.log == nil {
		u.log = slog.Default()
	}
	return u
}

// Serve uploads changes until ctx ends.
func (u *Uploader) Serve(ctx context.Context) error {
	delay := u.retry
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-u.table.changed:
		}
		if !sleep(ctx, u.interval) {
			return nil
		}
		for {
			err := u.flush(ctx)
			if err == nil {
				delay = u.retry
				break
			}
			if ctx.Err() != nil {
				return nil
			}
			u.log.Warn("lease sync to region failed; retrying", "err", err, "in", delay)
			if !sleep(ctx, delay) {
				return nil
			}
			delay = min(2*delay, u.maxRetry)
		}
	}
}

// flush sends every pending change in batches. A failed batch is queued again.
func (u *Uploader) flush(ctx context.Context) error {
	for {
		addrs, leases := u.table.takeDirty(u.batch)
		if len(leases) == 0 {
			return nil
		}
		if err := u.syncer.SyncLeases(ctx, leases); err != nil {
			u.table.markDirty(addrs)
			return err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// takeDirty removes up to n changed addresses from the queue and returns their leases.
func (t *Table) takeDirty(n int) ([]netip.Addr, []api.Lease) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.opts.Now()
	addrs := make([]netip.Addr, 0, min(n, len(t.dirty)))
	leases := make([]api.Lease, 0, cap(addrs))
	for a := range t.dirty {
		if len(addrs) == n {
			break
		}
		delete(t.dirty, a)
		addrs = append(addrs, a)
		leases = append(leases, t.byAddr[a].view(now).API(t.opts.Rack))
	}
	return addrs, leases
}

// markDirty queues addresses for upload again (their current state is sent).
func (t *Table) markDirty(addrs []netip.Addr) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, a := range addrs {
		t.dirty[a] = struct{}{}
	}
}
