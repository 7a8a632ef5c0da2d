package leases

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ironflow/ironflow/internal/backoff"
	"github.com/ironflow/ironflow/region/api"
)

// Syncer sends leases to the region (implemented by the rack's region API).
type Syncer interface {
	SyncLeases(ctx context.Context, leases []api.Lease) (api.LeaseSyncResult, error)
}

// ErrBatchRefused marks a Syncer error as the region's refusal of a batch for its content
// (as opposed to the region being unreachable, unavailable or refusing the rack): a record
// at fault may be isolated by sending smaller batches.
var ErrBatchRefused = errors.New("the region refused the lease batch")

// maxStrikes is how many times a lease the region refuses on its own is sent (with backoff
// in between) before the uploader gives up on that version of it.
const maxStrikes = 3

// Uploader sends changed leases to the region in batches. The table keeps serving while
// the region is unreachable; changes accumulate (one entry per address) and are retried.
// One bad record never holds back the others: the region rejects it individually, or a
// refused batch is halved until the record stands alone, and the record is dropped from
// the queue (logged and counted) after maxStrikes refusals.
type Uploader struct {
	table    *Table
	syncer   Syncer
	batch    int
	interval time.Duration   // how long changes are gathered before a send
	retry    backoff.Backoff // waits after failed sends
	log      *slog.Logger
	dropped  *prometheus.CounterVec
	strikes  map[netip.Addr]strike // leases the region refused on their own
}

// strike counts the refusals of one version of a lease.
type strike struct {
	lease api.Lease
	n     int
}

// UploaderOptions tune an Uploader; zero values take the defaults.
type UploaderOptions struct {
	BatchSize  int           // leases per SyncLeases call (default 500)
	Interval   time.Duration // gathering delay after a change (default 1s)
	RetryDelay time.Duration // first retry delay after a failure (default 1s, doubling to 1m)
	Registry   prometheus.Registerer
	Logger     *slog.Logger
}

// NewUploader returns an uploader of t's changes to s and registers its metrics with
// o.Registry when given.
func NewUploader(t *Table, s Syncer, o UploaderOptions) (*Uploader, error) {
	u := &Uploader{table: t, syncer: s, batch: o.BatchSize, interval: o.Interval,
		log: o.Logger, strikes: map[netip.Addr]strike{}, dropped: newDroppedCounter()}
	if u.batch <= 0 {
		u.batch = 500
	}
	if u.interval <= 0 {
		u.interval = time.Second
	}
	first := o.RetryDelay
	if first <= 0 {
		first = time.Second
	}
	u.retry = backoff.Backoff{Initial: first, Max: max(time.Minute, first)}
	if u.log == nil {
		u.log = slog.Default()
	}
	for _, reason := range []string{DropRejected, DropRefused} {
		u.dropped.WithLabelValues(reason) // exported as 0 from the start
	}
	if o.Registry != nil {
		if err := o.Registry.Register(u.dropped); err != nil {
			return nil, fmt.Errorf("lease sync metrics: %w", err)
		}
	}
	return u, nil
}

// Reasons a lease is dropped from the upload queue (the label of the dropped counter).
const (
	DropRejected = "rejected" // the region rejected the record in its answer
	DropRefused  = "refused"  // the region refused it alone maxStrikes times
)

func newDroppedCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ironflow_lease_sync_dropped_total",
		Help: "Leases not uploaded to the region because it refused them, by reason (rejected, refused).",
	}, []string{"reason"})
}

// Serve uploads changes until ctx ends.
func (u *Uploader) Serve(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-u.table.changed:
		}
		if backoff.Sleep(ctx, u.interval) != nil {
			return nil
		}
		for {
			err := u.flush(ctx)
			if err == nil {
				u.retry.Reset()
				break
			}
			if ctx.Err() != nil {
				return nil
			}
			delay := u.retry.Next()
			u.log.Warn("lease sync to region failed; retrying", "error", err, "in", delay)
			if backoff.Sleep(ctx, delay) != nil {
				return nil
			}
		}
	}
}

// flush sends every pending change in batches. When the region cannot be reached the
// batch in hand is queued again and the error returned. Leases the region refused alone
// are queued again after the others have been sent, with an error so that Serve backs off.
func (u *Uploader) flush(ctx context.Context) error {
	var again []netip.Addr
	for {
		addrs, leases := u.table.takeDirty(u.batch)
		if len(leases) == 0 {
			break
		}
		out, err := Send(ctx, u.syncer, leases)
		if err != nil {
			u.table.markDirty(addrs)
			u.table.markDirty(again)
			return err
		}
		for i := range leases {
			if err, refused := out.Refused[i]; !refused {
				delete(u.strikes, addrs[i])
			} else if u.strike(addrs[i], leases[i], err) {
				again = append(again, addrs[i])
			}
		}
		for _, r := range out.Rejected {
			u.dropped.WithLabelValues(DropRejected).Inc()
			u.log.Error("the region rejected a lease; not sending it again until it changes",
				"addr", r.IP, "mac", r.MAC, "error", r.Error)
		}
	}
	if len(again) > 0 {
		u.table.markDirty(again)
		return fmt.Errorf("the region refused %d lease(s) on their own; sending them again", len(again))
	}
	return nil
}

// strike counts a refusal of l and reports whether it is worth sending again.
func (u *Uploader) strike(a netip.Addr, l api.Lease, err error) bool {
	s := u.strikes[a]
	if s.lease != l {
		s = strike{lease: l}
	}
	s.n++
	if s.n < maxStrikes {
		u.strikes[a] = s
		return true
	}
	delete(u.strikes, a)
	u.dropped.WithLabelValues(DropRefused).Inc()
	u.log.Error("the region keeps refusing a lease; not sending it again until it changes",
		"addr", l.Addr, "mac", l.MAC, "hostname", l.Hostname, "attempts", s.n, "error", err)
	return false
}

// Outcome is what Send made of a batch.
type Outcome struct {
	Stored   int
	Rejected []api.LeaseRejection // refused by the region in its answer; Index is into the batch
	Refused  map[int]error        // leases the region refused even on their own, by index
}

// Send sends batch to s. When the region refuses the batch as a whole (ErrBatchRefused) it
// is halved until the refusals are down to single leases, so every other lease is stored.
// Any other error (the region unreachable or unavailable) ends the send and is returned;
// parts of the batch may have been stored by then.
func Send(ctx context.Context, s Syncer, batch []api.Lease) (Outcome, error) {
	out := Outcome{Refused: map[int]error{}}
	err := out.send(ctx, s, batch, 0)
	return out, err
}

func (o *Outcome) send(ctx context.Context, s Syncer, batch []api.Lease, offset int) error {
	res, err := s.SyncLeases(ctx, batch)
	switch {
	case err == nil:
		o.Stored += res.Stored
		for _, r := range res.Rejected {
			if r.Index >= 0 && r.Index < len(batch) {
				r.Index += offset
				o.Rejected = append(o.Rejected, r)
			}
		}
		return nil
	case !errors.Is(err, ErrBatchRefused):
		return err
	case len(batch) == 1:
		o.Refused[offset] = err
		return nil
	}
	half := len(batch) / 2
	if err := o.send(ctx, s, batch[:half], offset); err != nil {
		return err
	}
	return o.send(ctx, s, batch[half:], offset+half)
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
