package moves

import (
	"context"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	rackacts "github.com/ironflow/ironflow/activities/rack"
	"github.com/ironflow/ironflow/workflows"
)

// StartPodWork starts a pod workflow (workflows.PodCompose, PodDecompose, PodRefresh,
// PodPower) under id, one of the workflows.Pod…ID, recording who its grant names in its memo;
// a running one of the same id refuses it (AlreadyRunningError).
func StartPodWork(ctx context.Context, tc client.Client, id, grant string, workflow, in any) (client.WorkflowRun, error) {
	return start(ctx, tc, workflows.PodStartOptions(id), grant, workflow, in)
}

// RackPolls refuses a rack whose worker has not polled its task queue lately (Temporal keeps
// the pollers of the last few minutes): a pod workflow would wait for it until its steps time
// out.
func RackPolls(ctx context.Context, tc client.Client, rack string) error {
	q := rackacts.TaskQueue(rack)
	d, err := tc.DescribeTaskQueue(ctx, q, enumspb.TASK_QUEUE_TYPE_ACTIVITY)
	if err != nil {
		return fmt.Errorf("task queue %s: %w", q, err)
	}
	if len(d.GetPollers()) == 0 {
		return fmt.Errorf("rack %s runs no worker on its task queue %s: start it with `ironflow rack serve --temporal-address` pointing at this Temporal", rack, q)
	}
	return nil
}
