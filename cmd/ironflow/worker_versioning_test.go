package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/workers"
)

// A worker started with --make-current makes its build the deployment's current version; a
// worker of another build started without it leaves it so and says that it is not current.
func TestWorkerMakesItsBuildCurrentOnlyWhenAsked(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv, tc := startOwnDevServer(ctx, t)
	t.Setenv("IRONFLOW_REGIONS_FILE", writeRegionsFile(t, "regions:\n  region-a: {url: \"http://127.0.0.1:1\", token: a}\n"))

	runWorker := func(build string, args ...string) (stop func(), log *syncBuffer) {
		workerCtx, cancel := context.WithCancel(ctx)
		log = &syncBuffer{}
		done := make(chan int, 1)
		args = append([]string{"worker", "--temporal-address", srv.Address, "--build-id", build}, args...)
		go func() { done <- ironflowTo(workerCtx, &syncBuffer{}, log, "", args...) }()
		return func() {
			cancel()
			if code := <-done; code != 0 {
				t.Errorf("worker %s exited with %d: %s", build, code, log.String())
			}
		}, log
	}
	current := func() string {
		id, err := workers.CurrentBuildID(ctx, tc)
		if err != nil {
			return err.Error()
		}
		return id
	}

	stopOld, oldLog := runWorker("build-7", "--make-current")
	defer stopOld()
	eventually(t, func() string {
		if id := current(); id != "build-7" {
			return "current build " + id
		}
		if !strings.Contains(oldLog.String(), "this build is the current version") {
			return "no log of it: " + oldLog.String()
		}
		return ""
	})

	stopNew, newLog := runWorker("build-8")
	defer stopNew()
	eventually(t, func() string {
		if !strings.Contains(newLog.String(), "this build is not the current version") {
			return "no warning yet: " + newLog.String()
		}
		return ""
	})
	if id := current(); id != "build-7" {
		t.Errorf("current build %s after a worker of build-8 started without --make-current, want build-7", id)
	}
}
