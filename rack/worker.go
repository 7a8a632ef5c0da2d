package rack

import (
	"context"
	"log/slog"
	"time"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	rackacts "github.com/ironflow/ironflow/activities/rack"
	"github.com/ironflow/ironflow/internal/backoff"
)

// Delays between attempts to reach Temporal.
const (
	workerRetryFirst = time.Second
	workerRetryMax   = time.Minute
)

// runWorker runs the rack's Temporal worker on rackacts.TaskQueue(rack) until ctx ends.
// Temporal being unreachable never stops the rack from serving: the worker keeps trying.
func runWorker(ctx context.Context, o Options, rack string, acts *rackacts.Activities, log *slog.Logger) error {
	queue := rackacts.TaskQueue(rack)
	wait := backoff.Backoff{Initial: workerRetryFirst, Max: workerRetryMax}
	for {
		opts := o.Temporal
		if opts.Logger == nil {
			opts.Logger = tlog.NewStructuredLogger(log)
		}
		c, err := client.DialContext(ctx, opts)
		if err == nil {
			w := worker.New(c, queue, worker.Options{})
			w.RegisterActivity(acts)
			if err = w.Start(); err == nil {
				log.Info("rack worker polling", "task_queue", queue, "temporal", o.Temporal.HostPort)
				<-ctx.Done()
				w.Stop()
				c.Close()
				return nil
			}
			c.Close()
		}
		if ctx.Err() != nil {
			return nil
		}
		delay := wait.Next()
		log.Warn("Temporal not reachable; the rack serves on and retries", "temporal", o.Temporal.HostPort, "error", err, "retry_in", delay)
		if backoff.Sleep(ctx, delay) != nil {
			return nil
		}
	}
}
