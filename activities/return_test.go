package activities_test

import (
	"context"
	"slices"
	"testing"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/region/api"
)

// stubOnWest leaves on west the locked stub an earlier migration east → west → ... left there:
// the machine is coming back.
func stubOnWest(f *fixture, redirect string) {
	f.west.Put(api.Machine{Uuid: uuid, Name: "birdy", Locked: true, BootEnv: "local", Stage: "none",
		Meta: map[string]string{api.MetaRedirectEndpoint: redirect}})
}

// A machine migrating back to a region that holds its locked stub is no conflict there: the
// validation passes, the copy imports over the stub, and undoing the copy leaves the stub.
func TestMigrationBackOverOwnStub(t *testing.T) {
	f := newFixture(t)
	stubOnWest(f, "https://east.example:5240")
	in := activities.ValidateInput{Migration: migration, SourceRegion: "east", TargetRegion: "west", Machine: "Name:birdy"}
	if err := f.exec(a.ValidateMigration, in); err != nil {
		t.Fatalf("validation refused the return over the stub: %v", err)
	}
	if err := f.exec(a.DeleteImportedCopy, ref("west")); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.west.Machine(uuid); !ok {
		t.Error("undoing the copy deleted the stub it never replaced")
	}
	ticket, err := f.west.MintTicket(context.Background(), api.TicketRequest{})
	if err != nil {
		t.Fatal(err)
	}
	copyIn := activities.CopyInput{Migration: migration, SourceRegion: "east", TargetRegion: "west", Machine: uuid, Ticket: ticket.Token}
	if err := f.exec(a.ExportImport, copyIn); err != nil {
		t.Fatal(err)
	}
	want := []string{"west MintTicket", "east Export " + uuid, "west Import " + uuid}
	if got := f.journal.Calls(); !slices.Equal(got, want) {
		t.Errorf("calls\n got %v\nwant %v", got, want)
	}
	// The import replaces the stub with the inactive copy.
	if m, _ := f.west.Machine(uuid); m.Locked || m.Meta[api.MetaRedirectEndpoint] != "" || m.Runnable {
		t.Errorf("after the import over the stub: %+v", m)
	}
}

// Only a locked stub gives way: the same UUID unlocked, or locked without a redirect, is
// still a conflict.
func TestValidateRefusesOtherRecordOfSameMachine(t *testing.T) {
	tests := []struct {
		name string
		m    api.Machine
	}{
		{"unlocked redirect", api.Machine{Uuid: uuid, Name: "birdy", Meta: map[string]string{api.MetaRedirectEndpoint: "https://east.example:5240"}}},
		{"locked live record", api.Machine{Uuid: uuid, Name: "birdy", Locked: true}},
		{"inactive copy", api.Machine{Uuid: uuid, Name: "birdy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.west.Put(tt.m)
			in := activities.ValidateInput{Migration: migration, SourceRegion: "east", TargetRegion: "west", Machine: "Name:birdy"}
			if err := f.exec(a.ValidateMigration, in); !hasType(err, activities.ErrTypeDestinationConflict) {
				t.Errorf("got %v", err)
			}
		})
	}
}

func TestIsActive(t *testing.T) {
	tests := []struct {
		name string
		put  *api.Machine
		want bool
	}{
		{"missing", nil, false},
		{"inactive copy", &api.Machine{Uuid: uuid, Name: "birdy"}, false},
		{"active", &api.Machine{Uuid: uuid, Name: "birdy", Runnable: true}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			if tt.put != nil {
				f.west.Put(*tt.put)
			}
			v, err := f.env.ExecuteActivity(a.IsActive, ref("west"))
			if err != nil {
				t.Fatal(err)
			}
			var got bool
			if err := v.Get(&got); err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("IsActive = %v, want %v", got, tt.want)
			}
		})
	}
}
