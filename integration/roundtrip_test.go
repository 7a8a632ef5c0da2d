package integration

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/ironflow/ironflow/dev"
	"github.com/ironflow/ironflow/dev/seeddata"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/workflows"
)

// TestMigrateBirdyThereAndBack moves birdy region-a → region-b → region-a. The first leg
// leaves a locked stub on region-a (SkipMachineDestroy defaults to true); the way back is no
// conflict with that stub, and its import replaces it. After each leg birdy is live on
// exactly one region with both its jobs, and the other region holds its stub.
func TestMigrateBirdyThereAndBack(t *testing.T) {
	s := startStack(t, dev.StackOptions{Seed: true, RunWorker: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	before := getMachine(ctx, t, regionClient(s, "region-a"), seeddata.BirdyUUID)
	jobs := jobIDs(listJobs(ctx, t, regionClient(s, "region-a"), seeddata.BirdyUUID))
	if len(jobs) != 2 {
		t.Fatalf("the seed's birdy has jobs %v, want 2", jobs)
	}
	legs := []struct{ from, to string }{{"region-a", "region-b"}, {"region-b", "region-a"}}
	for _, leg := range legs {
		res := migrate(ctx, t, s, workflows.MigrateMachineInput{SourceRegion: leg.from, TargetRegion: leg.to, Machine: "Name:birdy"})
		if res.MachineUuid != seeddata.BirdyUUID || res.TargetEndpoint != s.Regions[leg.to].URL || res.Jobs != 2 {
			t.Errorf("%s → %s: result %+v", leg.from, leg.to, res)
		}
		assertActiveOnExactlyOne(ctx, t, s, seeddata.BirdyUUID, leg.to)
		stub := getMachine(ctx, t, regionClient(s, leg.from), seeddata.BirdyUUID)
		if !stub.Locked || stub.Meta[api.MetaRedirectEndpoint] != s.Regions[leg.to].URL {
			t.Errorf("%s → %s: %s holds no stub redirecting to %s: Locked=%v Meta=%v", leg.from, leg.to, leg.from, leg.to, stub.Locked, stub.Meta)
		}
		if got := jobIDs(listJobs(ctx, t, regionClient(s, leg.to), seeddata.BirdyUUID)); !slices.Equal(got, jobs) {
			t.Errorf("%s → %s: jobs on %s %v, want %v", leg.from, leg.to, leg.to, got, jobs)
		}
	}

	// Home again, birdy is the machine it was, active.
	after := getMachine(ctx, t, regionClient(s, "region-a"), seeddata.BirdyUUID)
	for _, f := range []struct {
		name      string
		got, want any
	}{
		{"Name", after.Name, before.Name},
		{"Profiles", after.Profiles, before.Profiles},
		{"Params", after.Params, before.Params},
		{"Tasks", after.Tasks, before.Tasks},
		{"HardwareAddrs", after.HardwareAddrs, before.HardwareAddrs},
		{"BootEnv", after.BootEnv, before.BootEnv},
		{"Stage", after.Stage, before.Stage},
		{"Description", after.Description, before.Description},
		{"Pool", after.Pool, before.Pool},
	} {
		if !reflect.DeepEqual(f.got, f.want) {
			t.Errorf("after the round trip %s = %v, want %v", f.name, f.got, f.want)
		}
	}
}

func jobIDs(jobs []api.Job) []string {
	ids := make([]string, 0, len(jobs))
	for _, j := range jobs {
		ids = append(ids, j.Uuid)
	}
	slices.Sort(ids)
	return ids
}
