package workflows_test

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/activities/regiontest"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/workflows"
)

// birdy is the seed's machine, with a MAC so MAC conflicts can be tested.
const birdyUUID = "01d8828f-2f7d-4a1c-a1fa-f668274c7c44"

func birdy() api.Machine {
	m := api.Machine{
		Arch: "amd64", Available: true, BootEnv: "sledgehammer",
		CurrentJob: "1ed352bc-1303-63f2-94d2-19d9b7aba263", CurrentTask: 2,
		HardwareAddrs: []string{"52:54:00:12:34:56"},
		Meta:          map[string]string{"feature-flags": "change-stage-v2", "machine-role": "machine"},
		Name:          "birdy", Pool: "default", PoolStatus: "Free",
		Profiles: []string{"example-profile", "conflicting-profile"},
		Runnable: true, Secret: "h5kYqfCu6ehiAVz0", Stage: "hello-world",
		Tasks: []string{"stage:hello-world", "hello-world"},
		Uuid:  birdyUUID, Validated: true, Workflow: "hello-world", WorkflowComplete: true,
		Rack: "rack-1",
	}
	m.Normalize()
	return m
}

func birdyJobs(currentState string) []api.Job {
	jobs := []api.Job{
		{Uuid: "1ed352bc-1301-695a-94d2-8dc4daeea809", Machine: birdyUUID, State: api.JobFinished, ExitState: "complete", Task: "stage:hello-world", NextIndex: 1},
		{Uuid: "1ed352bc-1303-63f2-94d2-19d9b7aba263", Machine: birdyUUID, State: currentState, Current: true, Task: "hello-world", CurrentIndex: 1, NextIndex: 2},
	}
	for i := range jobs {
		jobs[i].Normalize()
	}
	return jobs
}

// fixture is a test workflow environment running the real activities against two fake
// regions, east (source, holding birdy) and west (target).
type fixture struct {
	t          *testing.T
	env        *testsuite.TestWorkflowEnvironment
	journal    *regiontest.Journal
	east, west *regiontest.Region
	activities []string // activity types in the order they started
	phases     []string // MigrationPhase values in the order they were upserted
}

// a names activities for OnActivity.
var a *activities.Activities

// newFixture runs MigrateMachine, and the workflows parents (e.g. one that runs it as a child),
// over fake regions east and west.
func newFixture(t *testing.T, parents ...any) *fixture {
	f := &fixture{t: t, journal: &regiontest.Journal{}}
	f.east = regiontest.New("east", "https://east.example:5240", f.journal)
	f.west = regiontest.New("west", "https://west.example:5240", f.journal)
	f.east.Put(birdy())
	f.east.PutJobs(birdyJobs(api.JobFinished)...)
	f.east.PutProfiles(
		api.Profile{Name: "example-profile", Params: map[string]any{"p": 1}},
		api.Profile{Name: "conflicting-profile", Params: map[string]any{"drp1-only-param": true}},
	)
	f.west.PutProfiles(api.Profile{Name: "conflicting-profile", Params: map[string]any{"drp2-only-param": true}})

	var suite testsuite.WorkflowTestSuite
	f.env = suite.NewTestWorkflowEnvironment()
	f.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: workflows.MigrateMachineID(birdyUUID)})
	f.env.RegisterWorkflow(workflows.MigrateMachine)
	for _, p := range parents {
		f.env.RegisterWorkflow(p)
	}
	f.env.RegisterActivity(&activities.Activities{Regions: regiontest.Resolver(t, f.east, f.west)})
	f.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		f.activities = append(f.activities, info.ActivityType.Name)
	})
	f.env.OnUpsertTypedSearchAttributes(mock.Anything).Return(nil).Run(func(args mock.Arguments) {
		if phase, ok := args.Get(0).(temporal.SearchAttributes).GetKeyword(workflows.MigrationPhaseKey); ok {
			f.phases = append(f.phases, phase)
		}
	})
	return f
}

func (f *fixture) region(name string) *regiontest.Region {
	return map[string]*regiontest.Region{"east": f.east, "west": f.west}[name]
}

func input() workflows.MigrateMachineInput {
	return workflows.MigrateMachineInput{SourceRegion: "east", TargetRegion: "west", Machine: "Name:birdy"}
}

func (f *fixture) run(in workflows.MigrateMachineInput) (workflows.MigrateMachineResult, error) {
	f.t.Helper()
	f.env.ExecuteWorkflow(workflows.MigrateMachine, in)
	if !f.env.IsWorkflowCompleted() {
		f.t.Fatal("workflow did not complete")
	}
	var res workflows.MigrateMachineResult
	if err := f.env.GetWorkflowError(); err != nil {
		return res, err
	}
	if err := f.env.GetWorkflowResult(&res); err != nil {
		f.t.Fatal(err)
	}
	return res, nil
}

func (f *fixture) progress() workflows.Progress {
	f.t.Helper()
	v, err := f.env.QueryWorkflow(workflows.ProgressQuery)
	if err != nil {
		f.t.Fatalf("progress query: %v", err)
	}
	var p workflows.Progress
	if err := v.Get(&p); err != nil {
		f.t.Fatal(err)
	}
	return p
}

// assertUntouched checks the failure invariants: the source holds birdy exactly as before,
// runnable, with its jobs unarchived; the target holds nothing but maybe a stub redirecting
// to the source.
func (f *fixture) assertUntouched() {
	f.t.Helper()
	m, ok := f.east.Machine(birdyUUID)
	if !ok || !reflect.DeepEqual(m, birdy()) {
		f.t.Errorf("source machine after compensation:\n got %+v\nwant %+v", m, birdy())
	}
	if jobs := f.east.Jobs(birdyUUID); !reflect.DeepEqual(jobs, birdyJobs(api.JobFinished)) {
		f.t.Errorf("source jobs after compensation: %+v", jobs)
	}
	// A copy the source may have redirected the agent to stays as a stub sending it back.
	if m, ok := f.west.Machine(birdyUUID); ok && (!m.Locked || m.Runnable || m.Meta[api.MetaRedirectEndpoint] != "https://east.example:5240") {
		f.t.Errorf("target still holds %+v", m)
	}
}

// assertMigrated checks the success invariants: birdy is active only on the target, with
// every job, and the source holds the seed's locked stub (or nothing when stubDeleted).
func (f *fixture) assertMigrated(stubDeleted bool) {
	f.t.Helper()
	m, ok := f.west.Machine(birdyUUID)
	if !ok || !m.Runnable || !m.Available || m.Meta[api.MetaMigrating] != "" {
		f.t.Errorf("target machine: %+v (present %v)", m, ok)
	}
	want := birdy()
	want.Runnable = m.Runnable
	if !reflect.DeepEqual(m, want) {
		f.t.Errorf("target machine differs from the source's:\n got %+v\nwant %+v", m, want)
	}
	if got := len(f.west.Jobs(birdyUUID)); got != 2 {
		f.t.Errorf("target has %d jobs, want 2", got)
	}
	if p, _ := f.west.Profile("conflicting-profile"); !maps.Equal(p.Params, map[string]any{"drp2-only-param": true}) {
		f.t.Errorf("destination profile lost the name clash: %+v", p.Params)
	}
	if _, ok := f.west.Profile("example-profile"); !ok {
		f.t.Error("missing profile example-profile was not created on the target")
	}
	stub, ok := f.east.Machine(birdyUUID)
	switch {
	case stubDeleted && ok:
		f.t.Errorf("stub still on the source: %+v", stub)
	case !stubDeleted && (!ok || !stub.Locked || stub.Runnable || stub.Meta[api.MetaRedirectEndpoint] != "https://west.example:5240"):
		f.t.Errorf("source stub: %+v (present %v)", stub, ok)
	}
}

func errorType(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Type()
	}
	return ""
}

func equal[T comparable](t *testing.T, what string, got, want []T) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got %v\nwant %v", what, got, want)
	}
}
