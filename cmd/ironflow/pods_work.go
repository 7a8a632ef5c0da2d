package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/workflows"
	"github.com/ironflow/ironflow/workflows/moves"
)

// Pod work (ARCHITECTURE.md "Pods") runs in the pod's rack, as a workflow the CLI starts and
// waits for: the -E region first grants the caller work on the pod (operator or admin; a
// readonly token gets the region's 403 and nothing starts), and the rack has its region verify
// that grant before it touches the hypervisor.

// podWork is one pod workflow to start: its ID, the workflow and its input given the target.
type podWork struct {
	id       string
	workflow any
	input    func(workflows.PodTarget) any
}

// runPodWork has the -E region grant work on pod, starts w and waits for its result in out.
func runPodWork(cmd *cobra.Command, pod api.Pod, w podWork, out any) error {
	if pod.Rack == "" {
		return fmt.Errorf("pod %s has no Rack: its rack drives it (ironflow pods update %s '{\"Rack\": \"RACK-UUID\"}')", pod.Name, pod.Name)
	}
	g, err := regionClient(cmd).IssueGrant(cmd.Context(), api.GrantRequest{Kind: api.GrantPod, Key: pod.Uuid})
	if err != nil {
		return fmt.Errorf("the region did not authorise work on pod %s (it takes an operator or admin token): %w", pod.Name, err)
	}
	tc, err := dialTemporal(cmd, cliLogger(cmd))
	if err != nil {
		return err
	}
	defer tc.Close()
	if err := moves.RackPolls(cmd.Context(), tc, pod.Rack); err != nil {
		return fmt.Errorf("pod %s: %w", pod.Name, err)
	}
	in := w.input(workflows.PodTarget{Pod: pod.Uuid, Rack: pod.Rack, Grant: g.Token})
	run, err := moves.StartPodWork(cmd.Context(), tc, w.id, g.Token, w.workflow, in)
	var running *moves.AlreadyRunningError
	if errors.As(err, &running) {
		return fmt.Errorf("pod %s: %s", pod.Name, running)
	}
	if err != nil {
		return fmt.Errorf("pod %s: start %s: %w", pod.Name, w.id, err)
	}
	if err := run.Get(cmd.Context(), out); err != nil {
		// The rack's own errors name the pod already.
		msg, prefix := moves.FailureMessage(err), "pod "+pod.Name+": "
		if !strings.HasPrefix(msg, prefix) {
			msg = prefix + msg
		}
		return errors.New(msg)
	}
	return nil
}
