package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// ListRegionsID is the workflow ID prefix of ListRegions runs; each run adds a unique suffix.
const ListRegionsID = "list-regions/"

// listRegionsOptions: the answer is read from the worker's memory, so a slow or failing
// attempt is a worker problem, not one to wait out.
var listRegionsOptions = workflow.ActivityOptions{
	StartToCloseTimeout: 10 * time.Second,
	RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
}

// ListRegions answers with the names of the regions the workers of TaskQueue know (their
// regions file), so that the CLI checks --to and --from before it starts a migration, a
// transfer or a schedule, and lists the known names when one is wrong. Only a worker holds
// the regions file; asking it through a workflow works wherever the CLI reaches Temporal.
func ListRegions(ctx workflow.Context) ([]string, error) {
	var names []string
	err := call(ctx, listRegionsOptions, acts.RegionNames, nil, &names)
	return names, err
}
