package moves

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/workflows"
)

// NoWorkerError is a question no worker answered in time.
type NoWorkerError struct {
	TaskQueue string
	Timeout   time.Duration
}

func (e *NoWorkerError) Error() string {
	return fmt.Sprintf("no worker answered on task queue %s within %s", e.TaskQueue, e.Timeout)
}

// Regions asks the workers, which alone hold the regions file, for the names of their
// regions (workflows.ListRegions); no answer within timeout is a *NoWorkerError.
func Regions(ctx context.Context, tc client.Client, timeout time.Duration) ([]string, error) {
	opts := client.StartWorkflowOptions{
		ID:                       workflows.ListRegionsID + uuid.NewString(),
		TaskQueue:                workflows.TaskQueue,
		WorkflowExecutionTimeout: timeout,
	}
	run, err := tc.ExecuteWorkflow(ctx, opts, workflows.ListRegions)
	if err != nil {
		return nil, fmt.Errorf("ask the workers for their regions: %w", err)
	}
	var names []string
	err = run.Get(ctx, &names)
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case temporal.IsTimeoutError(err):
		return nil, &NoWorkerError{TaskQueue: workflows.TaskQueue, Timeout: timeout}
	case err != nil:
		return nil, fmt.Errorf("ask the workers for their regions: %s", FailureMessage(err))
	}
	return names, nil
}
