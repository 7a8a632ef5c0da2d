// Package heartbeat keeps a long activity call heartbeating, so a cancelled workflow reaches
// it (the cancellation is delivered with a heartbeat's answer) and a dead worker is noticed
// within the activity's HeartbeatTimeout instead of its StartToCloseTimeout.
package heartbeat

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
)

// Interval is how often While heartbeats: well below the HeartbeatTimeout the workflows set
// (10s for the steps waited for on cancel).
const Interval = 2 * time.Second

// While runs op, heartbeating every Interval until it returns. op gets ctx, which is
// cancelled when the workflow cancels the activity. Outside an activity (a direct call) it
// just runs op.
func While(ctx context.Context, op func(context.Context) error) error {
	if !activity.IsActivity(ctx) {
		return op(ctx)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(Interval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	err := op(ctx)
	close(stop)
	<-done
	return err
}
