package syslog

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/ironflow/ironflow/internal/backoff"
	"github.com/ironflow/ironflow/region/api"
)

// Poster sends a batch of messages to the region (the rack's region API, which fails over
// between the region's endpoints like every call of the rack).
type Poster interface {
	PostSyslog(ctx context.Context, batch []api.SyslogMessage) (api.SyslogSyncResult, error)
}

// maxBatchBytes bounds the JSON of one post, half the region's 1 MiB request body limit: a
// batch of long messages is cut short rather than refused as too large.
const maxBatchBytes = 512 << 10

// ErrBatchRefused marks a Poster error as the region's refusal of a batch for its content
// (as opposed to the region being unreachable, unavailable or refusing the rack): sending it
// again cannot help, so it is dropped and counted.
var ErrBatchRefused = errors.New("the region refused the syslog batch")

// ForwarderOptions tune a Forwarder; zero values take the defaults.
type ForwarderOptions struct {
	MaxBuffered int           // messages held for the region at most (default 10,000); more are dropped
	BatchSize   int           // messages per post (default 500, at most api.MaxSyslogBatch)
	Interval    time.Duration // gathering delay after the first new message (default 1s)
	RetryDelay  time.Duration // first delay after a failed post (default 1s, doubling to 1m)
	Logger      *slog.Logger
}

// Forwarder holds received messages in a bounded buffer and posts them to the region in
// batches. Push never blocks: when the buffer is full the new message is dropped and counted,
// so a flood or a region outage costs memory up to the bound and nothing else. While the
// region is unreachable the buffer keeps the oldest messages and retries with backoff.
type Forwarder struct {
	poster   Poster
	max      int
	batch    int
	interval time.Duration
	retry    backoff.Backoff
	m        *Metrics
	log      *slog.Logger

	mu   sync.Mutex
	buf  []api.SyslogMessage // oldest first; the head is in flight while a post runs
	wake chan struct{}
}

// NewForwarder returns a forwarder to p counting into m.
func NewForwarder(p Poster, m *Metrics, o ForwarderOptions) *Forwarder {
	f := &Forwarder{poster: p, max: o.MaxBuffered, batch: o.BatchSize, interval: o.Interval, m: m, log: o.Logger, wake: make(chan struct{}, 1)}
	if f.max <= 0 {
		f.max = 10000
	}
	if f.batch <= 0 || f.batch > api.MaxSyslogBatch {
		f.batch = min(500, api.MaxSyslogBatch)
	}
	if f.interval <= 0 {
		f.interval = time.Second
	}
	first := o.RetryDelay
	if first <= 0 {
		first = time.Second
	}
	f.retry = backoff.Backoff{Initial: first, Max: max(time.Minute, first)}
	if f.log == nil {
		f.log = slog.Default()
	}
	return f
}

// Push queues msg for the region; it reports false (and counts the drop) when the buffer is
// full.
func (f *Forwarder) Push(msg api.SyslogMessage) bool {
	f.mu.Lock()
	if len(f.buf) >= f.max {
		f.mu.Unlock()
		f.m.dropped.WithLabelValues(DropBufferFull).Inc()
		return false
	}
	f.buf = append(f.buf, msg)
	f.m.depth.Set(float64(len(f.buf)))
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
	return true
}

// Serve posts buffered messages until ctx ends.
func (f *Forwarder) Serve(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-f.wake:
		}
		if backoff.Sleep(ctx, f.interval) != nil {
			return nil
		}
		for {
			err := f.flush(ctx)
			if err == nil {
				f.retry.Reset()
				break
			}
			if ctx.Err() != nil {
				return nil
			}
			delay := f.retry.Next()
			f.log.Warn("syslog forwarding to region failed; retrying", "error", err, "in", delay, "buffered", f.buffered())
			if backoff.Sleep(ctx, delay) != nil {
				return nil
			}
		}
	}
}

// flush posts the buffer in batches. A batch leaves the buffer once the region answered it;
// when the region cannot be reached it stays at the head and the error is returned.
func (f *Forwarder) flush(ctx context.Context) error {
	for {
		batch := f.next()
		if len(batch) == 0 {
			return nil
		}
		res, err := f.poster.PostSyslog(ctx, batch)
		switch {
		case errors.Is(err, ErrBatchRefused):
			f.m.dropped.WithLabelValues(DropRefused).Add(float64(len(batch)))
			f.log.Error("the region refused a syslog batch; dropping it", "messages", len(batch), "error", err)
		case err != nil:
			return err
		default:
			f.m.sent.Add(float64(res.Stored))
			f.m.dropped.WithLabelValues(DropRejected).Add(float64(len(res.Rejected)))
			if len(res.Rejected) > 0 {
				f.log.Debug("the region refused syslog messages", "rejected", len(res.Rejected), "first", res.Rejected[0].Error)
			}
		}
		f.mu.Lock()
		f.buf = f.buf[len(batch):]
		f.m.depth.Set(float64(len(f.buf)))
		f.mu.Unlock()
	}
}

// next returns the head of the buffer that fits one post: at most BatchSize messages and
// maxBatchBytes of JSON, and at least one message.
func (f *Forwarder) next() []api.SyslogMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, size := 0, 2
	for n < len(f.buf) && n < f.batch {
		doc, err := json.Marshal(f.buf[n])
		if err != nil || n > 0 && size+len(doc)+1 > maxBatchBytes {
			break
		}
		size += len(doc) + 1
		n++
	}
	return f.buf[:n:n]
}

func (f *Forwarder) buffered() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.buf)
}
