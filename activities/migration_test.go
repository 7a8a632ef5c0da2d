package activities_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/activities/regiontest"
	"github.com/ironflow/ironflow/region/api"
)

const (
	uuid      = "01d8828f-2f7d-4a1c-a1fa-f668274c7c44"
	migration = "migrate-machine/" + uuid
)

type fixture struct {
	env        *testsuite.TestActivityEnvironment
	journal    *regiontest.Journal
	east, west *regiontest.Region
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{journal: &regiontest.Journal{}}
	f.east = regiontest.New("east", "https://east.example:5240", f.journal)
	f.west = regiontest.New("west", "https://west.example:5240", f.journal)
	f.east.Put(api.Machine{Uuid: uuid, Name: "birdy", Runnable: true, Available: true, Profiles: []string{"p"}, Meta: map[string]string{"machine-role": "machine"}})
	f.east.PutJobs(api.Job{Uuid: "job-1", Machine: uuid, State: api.JobFinished})
	f.east.PutProfiles(api.Profile{Name: "p"})
	var suite testsuite.WorkflowTestSuite
	f.env = suite.NewTestActivityEnvironment()
	f.env.RegisterActivity(&activities.Activities{Regions: regiontest.Resolver(t, f.east, f.west)})
	return f
}

func (f *fixture) exec(activity any, in any) error {
	_, err := f.env.ExecuteActivity(activity, in)
	return err
}

var a *activities.Activities

func ref(region string) activities.MachineRef {
	return activities.MachineRef{Region: region, Machine: uuid, Migration: migration}
}

// Running every activity twice, as Temporal does after a crash that lost the first answer,
// changes the regions once.
func TestActivitiesAreIdempotent(t *testing.T) {
	f := newFixture(t)
	v, err := f.env.ExecuteActivity(a.MintTicket, "west")
	if err != nil {
		t.Fatal(err)
	}
	var ticket string
	if err := v.Get(&ticket); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		activity any
		in       any
	}{
		{a.Quiesce, ref("east")},
		{a.ExportImport, activities.CopyInput{Migration: migration, SourceRegion: "east", TargetRegion: "west", Machine: uuid, Ticket: ticket}},
		{a.FinalizeMigration, activities.FinalizeInput{MachineRef: ref("east"), RedirectEndpoint: "https://west.example:5240"}},
		{a.RestoreMigration, ref("east")},
		{a.Unquiesce, ref("east")},
		{a.DeleteImportedCopy, ref("west")},
	}
	for _, s := range steps {
		for range 2 {
			if err := f.exec(s.activity, s.in); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := []string{
		"west MintTicket", "east Quiesce " + uuid, "east Export " + uuid, "west Import " + uuid, "east Export " + uuid,
		"east FinalizeMigration " + uuid, "east RestoreMigration " + uuid, "east Unquiesce " + uuid, "west DeleteMachine " + uuid,
	}
	if got := f.journal.Calls(); !slices.Equal(got, want) {
		t.Errorf("calls\n got %v\nwant %v", got, want)
	}
	if m, _ := f.east.Machine(uuid); !m.Runnable || m.Meta[api.MetaMigrating] != "" {
		t.Errorf("source not restored: %+v", m)
	}
}

func TestActivitiesClassifyRegionErrors(t *testing.T) {
	tests := []struct {
		status    int
		retryable bool
	}{
		{http.StatusBadRequest, false},
		{http.StatusUnauthorized, false},
		{http.StatusForbidden, false},
		{http.StatusConflict, false},
		{http.StatusUnprocessableEntity, false},
		{http.StatusRequestTimeout, true},
		{http.StatusTooManyRequests, true},
		{http.StatusInternalServerError, true},
		{http.StatusServiceUnavailable, true},
	}
	for _, tt := range tests {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			f := newFixture(t)
			f.east.Fail("Quiesce", tt.status, 1)
			err := f.exec(a.Quiesce, ref("east"))
			var appErr *temporal.ApplicationError
			if !errors.As(err, &appErr) {
				t.Fatalf("got %v", err)
			}
			if appErr.NonRetryable() == tt.retryable {
				t.Errorf("HTTP %d: non-retryable = %v", tt.status, appErr.NonRetryable())
			}
			if !strings.Contains(err.Error(), "quiesce machine "+uuid+" on east") {
				t.Errorf("error does not say what failed: %v", err)
			}
		})
	}
}

func TestActivitiesRefuseUnsafeDeletes(t *testing.T) {
	f := newFixture(t)
	f.west.Put(api.Machine{Uuid: uuid, Name: "birdy", Runnable: true})
	if err := f.exec(a.DeleteImportedCopy, ref("west")); !hasType(err, activities.ErrTypeUnsafeDelete) {
		t.Errorf("deleting an active target machine: %v", err)
	}
	if err := f.exec(a.DeleteStub, ref("east")); !hasType(err, activities.ErrTypeUnsafeDelete) {
		t.Errorf("deleting a live source machine: %v", err)
	}
	if got := f.journal.Calls(); len(got) != 0 {
		t.Errorf("calls %v", got)
	}
}

func TestExportImportRefusesActiveCopy(t *testing.T) {
	f := newFixture(t)
	f.west.Put(api.Machine{Uuid: uuid, Name: "birdy", Runnable: true})
	err := f.exec(a.ExportImport, activities.CopyInput{SourceRegion: "east", TargetRegion: "west", Machine: uuid, Ticket: "t"})
	if !hasType(err, activities.ErrTypeDestinationConflict) {
		t.Errorf("got %v", err)
	}
}

func TestQuiesceRefusesOtherMigration(t *testing.T) {
	f := newFixture(t)
	f.east.Update(uuid, func(m *api.Machine) { m.Meta[api.MetaMigrating] = "migrate-machine/other" })
	if err := f.exec(a.Quiesce, ref("east")); !hasType(err, activities.ErrTypeAlreadyMigrating) {
		t.Errorf("got %v", err)
	}
	if err := f.exec(a.Unquiesce, ref("east")); err != nil || len(f.journal.Calls()) != 0 {
		t.Errorf("unquiesce touched another migration's machine: %v %v", err, f.journal.Calls())
	}
}

// An operator may delete the machine before the quiesce holds it (the kill-point harness,
// quiesce/delete-on-source): the undo of the quiesce then has nothing to undo, and must not
// report the move's compensation as failed.
func TestUnquiesceOfDeletedMachineUndoesNothing(t *testing.T) {
	f := newFixture(t)
	f.east.Delete(uuid)
	if err := f.exec(a.Unquiesce, ref("east")); err != nil {
		t.Errorf("unquiesce of a machine deleted before it was held: %v", err)
	}
}

func TestWaitForAgentCheckIn(t *testing.T) {
	const previous = "2026-11-30T06:00:00Z"
	tests := []struct {
		name     string
		checkIn  bool
		deadline time.Duration
		wantType string
	}{
		{"agent checks in", true, time.Minute, ""},
		{"agent stays away", false, 50 * time.Millisecond, activities.ErrTypeAgentCheckInTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.west.Put(api.Machine{Uuid: uuid, Name: "birdy", Meta: map[string]string{api.MetaAgentLastSeen: previous}})
			if tt.checkIn {
				time.AfterFunc(30*time.Millisecond, func() {
					f.west.Update(uuid, func(m *api.Machine) { m.Meta[api.MetaAgentLastSeen] = "2026-11-30T06:05:00Z" })
				})
			}
			in := activities.AgentWaitInput{MachineRef: ref("west"), Previous: previous, Deadline: time.Now().Add(tt.deadline), PollInterval: 10 * time.Millisecond}
			err := f.exec(a.WaitForAgentCheckIn, in)
			if tt.wantType == "" && err != nil || tt.wantType != "" && !hasType(err, tt.wantType) {
				t.Errorf("got %v, want %q", err, tt.wantType)
			}
		})
	}
}

func TestWaitForAgentCheckInStopsOnCancel(t *testing.T) {
	f := newFixture(t)
	f.west.Put(api.Machine{Uuid: uuid, Name: "birdy"})
	ctx, cancel := context.WithCancel(context.Background())
	f.env.SetWorkerOptions(worker.Options{BackgroundActivityContext: ctx})
	time.AfterFunc(30*time.Millisecond, cancel)
	in := activities.AgentWaitInput{MachineRef: ref("west"), Deadline: time.Now().Add(time.Hour), PollInterval: 10 * time.Millisecond}
	if err := f.exec(a.WaitForAgentCheckIn, in); err == nil || !strings.Contains(err.Error(), "canceled") {
		t.Errorf("got %v", err)
	}
}

func hasType(err error, typ string) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.Type() == typ
}

// A finalize that lands after the undos of the finalize and of the copy ran leaves the source
// a stub and the target a stub redirecting back: the undo of the quiesce restores the source
// from its stub, so the machine is active on the source, not on no region.
func TestUnquiesceRestoresSourceFinalizedAfterItsUndo(t *testing.T) {
	f := newFixture(t)
	before, _ := f.east.Machine(uuid)
	copyIn := activities.CopyInput{Migration: migration, SourceRegion: "east", TargetRegion: "west", Machine: uuid}
	finalize := activities.FinalizeInput{MachineRef: ref("east"), RedirectEndpoint: "https://west.example:5240"}
	for _, s := range []struct {
		activity, in any
	}{
		{a.Quiesce, ref("east")},
		{a.ExportImport, copyIn},
		{a.RestoreMigration, ref("east")},
		{a.UndoCopy, activities.UndoCopyInput{Source: ref("east"), Target: ref("west"), RedirectBack: true}},
		{a.FinalizeMigration, finalize}, // the late answer of the cancelled finalize
		{a.Unquiesce, ref("east")},
	} {
		if err := f.exec(s.activity, s.in); err != nil {
			t.Fatal(err)
		}
	}
	if m, _ := f.east.Machine(uuid); !m.Runnable || m.Meta[api.MetaRedirectEndpoint] != "" || m.Meta[api.MetaMigrating] != "" || !slices.Equal(m.Profiles, before.Profiles) {
		t.Errorf("source after the undos: %+v, want the machine live as before %+v", m, before)
	}
	if m, _ := f.west.Machine(uuid); m.Runnable || m.Meta[api.MetaRedirectEndpoint] != "https://east.example:5240" {
		t.Errorf("target after the undos: %+v, want a stub redirecting to the source", m)
	}
}
