package activities_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/region/api"
)

// drainRegion is a region with three machines behind rack r1 (one a stub of a machine
// migrated away) and one behind r2; jobs answers its job lists.
func drainRegion(t *testing.T, jobs func(n int) []api.Job) (*testsuite.TestActivityEnvironment, *listRegion) {
	region := &listRegion{jobs: jobs, machines: []api.Machine{
		{Uuid: "u-3", Name: "c", Rack: "r1"},
		{Uuid: "u-1", Name: "a", Rack: "r1"},
		{Uuid: "u-0", Name: "old", Rack: "r1", Meta: map[string]string{api.MetaRedirectEndpoint: "https://west.example:5240"}},
		{Uuid: "u-2", Name: "b", Rack: "r2"},
	}}
	regions, err := activities.NewRegions(map[string]activities.RegionConfig{"east": {URL: region.serve(t), Token: "t"}}, activities.DialClient)
	if err != nil {
		t.Fatal(err)
	}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(&activities.Activities{Regions: regions})
	return env, region
}

func TestRackMachinesListsThoseLeftAfterTheCursor(t *testing.T) {
	env, _ := drainRegion(t, nil)
	for _, tt := range []struct {
		after string
		limit int
		want  []string
	}{
		{"", 10, []string{"u-1", "u-3"}},
		{"", 1, []string{"u-1"}},
		{"u-1", 10, []string{"u-3"}},
		{"u-3", 10, nil},
	} {
		v, err := env.ExecuteActivity(a.RackMachines, activities.RackMachinesInput{Region: "east", Rack: "r1", After: tt.after, Limit: tt.limit})
		var got []string
		if err == nil {
			err = v.Get(&got)
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("after %q, limit %d: %v, %v; want %v", tt.after, tt.limit, got, err, tt.want)
		}
	}
}

// The drain polls until no job runs on a machine behind the rack: jobs of other racks' machines
// and jobs that ended do not hold it.
func TestDrainRackJobsWaitsForTheRacksRunningJobs(t *testing.T) {
	env, region := drainRegion(t, func(n int) []api.Job {
		jobs := []api.Job{
			{Uuid: "j-other", Machine: "u-2", State: api.JobRunning, Task: "other-rack"},
			{Uuid: "j-done", Machine: "u-1", State: api.JobFinished, Task: "done"},
		}
		if n < 3 {
			jobs = append(jobs, api.Job{Uuid: "j-1", Machine: "u-3", State: api.JobRunning, Task: "long"})
		}
		return jobs
	})
	v, err := env.ExecuteActivity(a.DrainRackJobs, activities.DrainInput{Region: "east", Rack: "r1", Deadline: time.Now().Add(time.Minute), Poll: 10 * time.Millisecond})
	var res activities.DrainResult
	if err == nil {
		err = v.Get(&res)
	}
	region.mu.Lock()
	lists := region.jobLists
	region.mu.Unlock()
	if err != nil || res != (activities.DrainResult{Running: 1, Polls: 3}) || lists != 3 {
		t.Errorf("drain: %+v, %v after %d job lists; want one job running, gone at the third poll", res, err, lists)
	}
}

// A job still running at the deadline fails the drain for good, naming the job and its machine.
func TestDrainRackJobsGivesUpAtItsDeadline(t *testing.T) {
	env, _ := drainRegion(t, func(int) []api.Job {
		return []api.Job{{Uuid: "j-1", Machine: "u-3", State: api.JobRunning, Task: "long"}}
	})
	start := time.Now()
	_, err := env.ExecuteActivity(a.DrainRackJobs, activities.DrainInput{Region: "east", Rack: "r1", Deadline: start.Add(100 * time.Millisecond), Poll: 20 * time.Millisecond})
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != activities.ErrTypeJobsRunning || !appErr.NonRetryable() || !strings.Contains(appErr.Error(), "machine u-3 runs job j-1 (long)") {
		t.Fatalf("got %v, want a non-retryable %s error naming the job", err, activities.ErrTypeJobsRunning)
	}
	if waited := time.Since(start); waited < 100*time.Millisecond {
		t.Errorf("gave up after %s, before its deadline", waited)
	}
}
