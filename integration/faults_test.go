package integration

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/ironflow/ironflow/dev"
	"github.com/ironflow/ironflow/workflows"
)

// TestRegionOutagesDuringMigration takes a region's API away during a migration and checks
// that the migration finishes, that at no moment a machine is live on both regions, and that
// no job is lost: the source goes down after the machine was imported and finalized (the
// workflow waits for the agent at the destination), the destination is down when a migration
// starts and comes back.
func TestRegionOutagesDuringMigration(t *testing.T) {
	s := startStack(t, dev.StackOptions{Seed: true, RunWorker: true})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	a, b := regionClient(s, "region-a"), regionClient(s, "region-b")

	t.Run("source down after import", func(t *testing.T) {
		if _, err := a.Machines().Patch(ctx, "Name:birdy", json.RawMessage(`{"Meta": {"agent-last-seen": "2026-11-30T05:00:00Z"}}`)); err != nil {
			t.Fatal(err)
		}
		birdy := getMachine(ctx, t, a, "Name:birdy")
		run := startMigration(ctx, t, s, workflows.MigrateMachineInput{SourceRegion: "region-a", TargetRegion: "region-b", Machine: birdy.Uuid})
		waitForPhase(ctx, t, s, run.GetID(), workflows.PhaseRepointing)
		if err := s.StopRegion("region-a"); err != nil {
			t.Fatal(err)
		}
		assertNotLiveOn(ctx, t, s, birdy.Uuid, "region-b")
		agentCheckIn(ctx, t, s.Regions["region-b"].URL, birdy)
		var res workflows.MigrateMachineResult
		if err := run.Get(ctx, &res); err != nil {
			t.Fatalf("migration with the source down: %v", err)
		}
		if err := s.StartRegion("region-a"); err != nil {
			t.Fatal(err)
		}
		assertActiveOnExactlyOne(ctx, t, s, birdy.Uuid, "region-b")
		if got := len(listJobs(ctx, t, b, birdy.Uuid)); got != 2 {
			t.Errorf("birdy has %d jobs on region-b, want 2", got)
		}
	})

	t.Run("destination down at the start", func(t *testing.T) {
		m := getMachine(ctx, t, a, "Name:drp1.rackn")
		if err := s.StopRegion("region-b"); err != nil {
			t.Fatal(err)
		}
		run := startMigration(ctx, t, s, workflows.MigrateMachineInput{SourceRegion: "region-a", TargetRegion: "region-b", Machine: m.Uuid})
		time.Sleep(3 * time.Second) // the workflow meets the outage and retries
		if err := s.StartRegion("region-b"); err != nil {
			t.Fatal(err)
		}
		var res workflows.MigrateMachineResult
		if err := run.Get(ctx, &res); err != nil {
			t.Fatalf("migration after the destination came back: %v", err)
		}
		assertActiveOnExactlyOne(ctx, t, s, m.Uuid, "region-b")
	})
}

// assertNotLiveOn checks that, while the other region is down, the machine is not live on
// the region still up (mid-migration the destination copy stays inactive).
func assertNotLiveOn(ctx context.Context, t *testing.T, s *dev.Stack, machine, region string) {
	t.Helper()
	m, err := regionClient(s, region).Machines().Get(ctx, machine)
	if err == nil && m.Runnable {
		t.Errorf("machine %s is live on %s while the other region is down mid-migration", machine, region)
	}
}
