package integration

import (
	"context"
	"testing"
	"time"

	"github.com/ironflow/ironflow/dev"
	"github.com/ironflow/ironflow/workflows"
)

// TestRegionOutagesDuringMigration takes a region's API away in the middle of a migration
// (the source while the machine is being copied, then the destination while another machine
// is quiesced) and brings it back: the migrations retry, finish, and at no moment is a
// machine live on both regions, nor lost.
func TestRegionOutagesDuringMigration(t *testing.T) {
	s := startStack(t, dev.StackOptions{Seed: true, RunWorker: true})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	cases := []struct {
		machine, down, phase string
	}{
		{"Name:birdy", "region-a", workflows.PhaseCopying},
		{"Name:drp1.rackn", "region-b", workflows.PhaseQuiescing},
	}
	for _, c := range cases {
		m := getMachine(ctx, t, regionClient(s, "region-a"), c.machine)
		jobs := len(listJobs(ctx, t, regionClient(s, "region-a"), m.Uuid))
		run := startMigration(ctx, t, s, workflows.MigrateMachineInput{SourceRegion: "region-a", TargetRegion: "region-b", Machine: m.Uuid})
		waitForPhase(ctx, t, s, run.GetID(), c.phase)
		if err := s.StopRegion(c.down); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second) // long enough for the workflow to hit the outage and retry
		up := "region-a"
		if c.down == up {
			up = "region-b"
		}
		assertNotLiveOn(ctx, t, s, m.Uuid, up)
		if err := s.StartRegion(c.down); err != nil {
			t.Fatal(err)
		}
		var res workflows.MigrateMachineResult
		if err := run.Get(ctx, &res); err != nil {
			t.Fatalf("%s with %s down during %s: %v", c.machine, c.down, c.phase, err)
		}
		assertActiveOnExactlyOne(ctx, t, s, m.Uuid, "region-b")
		if got := len(listJobs(ctx, t, regionClient(s, "region-b"), m.Uuid)); got != jobs {
			t.Errorf("%s has %d jobs on region-b, had %d", c.machine, got, jobs)
		}
	}
}

// assertNotLiveOn checks that, while the other region is down, the machine is not live on
// the region still up (mid-migration it is quiesced on the source and inactive on the target).
func assertNotLiveOn(ctx context.Context, t *testing.T, s *dev.Stack, machine, region string) {
	t.Helper()
	m, err := regionClient(s, region).Machines().Get(ctx, machine)
	if err == nil && m.Runnable {
		t.Errorf("machine %s is live on %s while the other region is down mid-migration", machine, region)
	}
}
