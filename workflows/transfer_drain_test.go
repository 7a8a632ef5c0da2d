package workflows_test

import (
	"testing"
	"time"

	"github.com/ironflow/ironflow/workflows"
)

// One drain waits for the running jobs of all the rack's machines, up to WaitForRunningJob;
// the machines' migrations then wait only for what is left of that time, not each for all of
// it again.
func TestTransferRackDrainsJobsOnceForAllMachines(t *testing.T) {
	machines := machineUUIDs(4)
	children := &fakeChildren{duration: func(string) time.Duration { return 3 * time.Minute }}
	e := newTransferEnv(t, machines, children)
	start := e.env.Now()
	in := transferInput(1)
	in.WaitForRunningJob = 7 * time.Minute
	if _, err := e.run(in); err != nil {
		t.Fatal(err)
	}
	if len(e.acts.drains) != 1 || !e.acts.drains[0].Deadline.Equal(start.Add(7*time.Minute)) {
		t.Fatalf("drains %+v, want one until %s", e.acts.drains, start.Add(7*time.Minute))
	}
	var waits []time.Duration
	for _, c := range children.inputs {
		waits = append(waits, c.WaitForRunningJob)
	}
	equal(t, "children's waits for running jobs", waits, []time.Duration{7 * time.Minute, 4 * time.Minute, time.Minute, 0})
	equal(t, "phases", e.phases[:4], []string{workflows.PhaseValidating, workflows.PhasePausingRack, workflows.PhaseDrainingJobs, workflows.PhaseCopyingNetwork})
}
