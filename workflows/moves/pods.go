package moves

import (
	"context"

	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/workflows"
)

// StartPodWork starts a pod workflow (workflows.PodCompose, PodDecompose, PodRefresh,
// PodPower) under id, one of the workflows.Pod…ID, recording who its grant names in its memo;
// a running one of the same id refuses it (AlreadyRunningError).
func StartPodWork(ctx context.Context, tc client.Client, id, grant string, workflow, in any) (client.WorkflowRun, error) {
	return start(ctx, tc, workflows.PodStartOptions(id), grant, workflow, in)
}
