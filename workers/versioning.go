package workers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/internal/backoff"
)

// DeploymentName is the Temporal worker deployment of every migration worker: its versions
// are the workers' build IDs.
const DeploymentName = "ironflow"

// Versioned makes the worker the version buildID of DeploymentName and pins every workflow it
// runs to it: a run, its children on the same task queue and its continuations run only on
// workers of the build that started the run, which decode the inputs that build writes, so
// workers of a new build can start while runs of the old one go on. New runs go to the
// deployment's current version (MakeCurrent). Give it after WithOptions, which replaces all.
func Versioned(buildID string) Option {
	return func(opts *worker.Options) {
		opts.DeploymentOptions = worker.DeploymentOptions{
			UseVersioning:             true,
			Version:                   worker.WorkerDeploymentVersion{DeploymentName: DeploymentName, BuildID: buildID},
			DefaultVersioningBehavior: workflow.VersioningBehaviorPinned,
		}
	}
}

// Waits between attempts to make a version current: the server knows a version only once one
// of its workers has polled, which takes a second or so after the worker starts.
var makeCurrentBackoff = backoff.Backoff{Initial: 200 * time.Millisecond, Max: 5 * time.Second}

// MakeCurrent makes buildID the current version of DeploymentName: every run started from now
// on (by the CLI or a schedule) runs on it, while the runs already going, and the children they
// start, stay on their own build. It retries until a worker of buildID has polled or ctx ends;
// a refusal of another kind (no permission) is returned at once.
func MakeCurrent(ctx context.Context, c client.Client, buildID string) error {
	h := c.WorkerDeploymentClient().GetHandle(DeploymentName)
	wait := makeCurrentBackoff
	for {
		_, err := h.SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{BuildID: buildID})
		if err == nil {
			return nil
		}
		if !versionNotSeenYet(err) {
			return fmt.Errorf("make build %s current in worker deployment %s: %w", buildID, DeploymentName, err)
		}
		if err := backoff.Sleep(ctx, wait.Next()); err != nil {
			return fmt.Errorf("make build %s current in worker deployment %s: no worker of it polled: %w", buildID, DeploymentName, err)
		}
	}
}

// versionNotSeenYet reports the answers of a server that has not yet seen a poller of the
// deployment or of the version.
func versionNotSeenYet(err error) bool {
	var precondition *serviceerror.FailedPrecondition
	var notFound *serviceerror.NotFound
	return errors.As(err, &precondition) || errors.As(err, &notFound)
}

// CurrentBuildID is the build ID of DeploymentName's current version; empty when it has none
// (new runs then go to unversioned workers only) or the deployment has no worker yet.
func CurrentBuildID(ctx context.Context, c client.Client) (string, error) {
	d, err := c.WorkerDeploymentClient().GetHandle(DeploymentName).Describe(ctx, client.WorkerDeploymentDescribeOptions{})
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("describe worker deployment %s: %w", DeploymentName, err)
	}
	if v := d.Info.RoutingConfig.CurrentVersion; v != nil {
		return v.BuildID, nil
	}
	return "", nil
}
