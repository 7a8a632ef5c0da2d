package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/internal/buildid"
	"github.com/ironflow/ironflow/workers"
)

// The worker's version in the Temporal worker deployment workers.DeploymentName.
const (
	flagBuildID     = "build-id"
	flagMakeCurrent = "make-current"
)

// workerVersion is the build the worker runs as and whether it makes that build current.
type workerVersion struct {
	BuildID     string
	MakeCurrent bool
}

func (v *workerVersion) declare(e envFlags) {
	e.string(&v.BuildID, flagBuildID, "", "the worker's build ID in the Temporal worker deployment "+workers.DeploymentName+
		"; every run stays on the build that started it; default: the binary's VCS revision, or a digest of the binary")
	e.bool(&v.MakeCurrent, flagMakeCurrent, false, "make this build the deployment's current version once the worker polls, so new runs start on it")
}

// resolved is v with the build ID derived from the binary when none was given.
func (v workerVersion) resolved() (workerVersion, error) {
	if v.BuildID = strings.TrimSpace(v.BuildID); v.BuildID != "" {
		return v, nil
	}
	var err error
	if v.BuildID, err = buildid.FromBinary(); err != nil {
		return v, fmt.Errorf("--%s not given: %w", flagBuildID, err)
	}
	return v, nil
}

// announceVersion makes the worker's build current when asked to, else says which build new
// runs go to, so an operator sees a worker that only drains or waits for its build to become
// current.
func announceVersion(ctx context.Context, c client.Client, v workerVersion, logger *slog.Logger) error {
	if v.MakeCurrent {
		if err := workers.MakeCurrent(ctx, c, v.BuildID); err != nil {
			if ctx.Err() != nil { // the worker stops: nothing to report
				return nil
			}
			return err
		}
		logger.Info("this build is the current version: new runs start on it", "build_id", v.BuildID, "deployment", workers.DeploymentName)
		return nil
	}
	current, err := workers.CurrentBuildID(ctx, c)
	switch {
	case err != nil:
		logger.Warn("cannot read the worker deployment's current version", "deployment", workers.DeploymentName, "error", err)
	case current == v.BuildID:
		logger.Info("this build is the current version: new runs start on it", "build_id", v.BuildID, "deployment", workers.DeploymentName)
	case current == "":
		logger.Warn("the worker deployment has no current version: new runs wait for it; make this build current with --make-current or `temporal worker deployment set-current-version`",
			"build_id", v.BuildID, "deployment", workers.DeploymentName)
	default:
		logger.Warn("this build is not the current version: it runs only the runs pinned to it; make it current with --make-current or `temporal worker deployment set-current-version`",
			"build_id", v.BuildID, "current_build_id", current, "deployment", workers.DeploymentName)
	}
	return nil
}
