package activities_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/activities/regiontest"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

const rackUUID = "aaaaaaaa-0000-4000-8000-00000000000a"

// rackRegion is a fake region with the rack transfer calls: it holds at most the one rack,
// answers the check with conflicts, and fails the calls named in fail with their status.
type rackRegion struct {
	*regiontest.Region
	rack      *api.Rack
	bundle    api.RackBundle
	conflicts []string
	queued    []api.PendingOperation
	fail      map[string]int
	calls     []string
	imported  []api.RackBundle
	releases  []api.OperationsRelease
}

func newRackRegion(name string, rack *api.Rack) *rackRegion {
	return &rackRegion{Region: regiontest.New(name, "https://"+name+".example:5240", nil), rack: rack, fail: map[string]int{}}
}

func (r *rackRegion) call(name string) error {
	r.calls = append(r.calls, name)
	if code := r.fail[name]; code != 0 {
		return &client.APIError{StatusCode: code, Message: name + " failed"}
	}
	return nil
}

func (r *rackRegion) GetRack(_ context.Context, key string) (api.Rack, error) {
	if err := r.call("GetRack"); err != nil {
		return api.Rack{}, err
	}
	if r.rack == nil || r.rack.Uuid != key {
		return api.Rack{}, &client.APIError{StatusCode: http.StatusNotFound, Message: "rack " + key + " not found"}
	}
	return *r.rack, nil
}

func (r *rackRegion) PauseRack(context.Context, string, api.RackHold) (api.Rack, error) {
	return api.Rack{}, r.call("PauseRack")
}

func (r *rackRegion) RecoverRackTransfer(context.Context, string, api.RackRecovery) (api.RackRecovered, error) {
	return api.RackRecovered{Done: true}, r.call("RecoverRackTransfer")
}

func (r *rackRegion) UnpauseRack(_ context.Context, rack string) (api.Rack, error) {
	return api.Rack{}, r.call("UnpauseRack")
}

func (r *rackRegion) ExportRack(context.Context, string) (api.RackBundle, error) {
	return r.bundle, r.call("ExportRack")
}

func (r *rackRegion) CheckRackImport(context.Context, api.RackBundle) (api.TransferCheck, error) {
	return api.TransferCheck{Conflicts: r.conflicts}, r.call("CheckRackImport")
}

func (r *rackRegion) ImportRack(_ context.Context, b api.RackBundle) (api.RackImport, error) {
	r.imported = append(r.imported, b)
	return api.RackImport{Subnets: len(b.Subnets)}, r.call("ImportRack")
}

func (r *rackRegion) UndoRackImport(context.Context, string) error { return r.call("UndoRackImport") }
func (r *rackRegion) HandOverRack(context.Context, string) error   { return r.call("HandOverRack") }

func (r *rackRegion) RackOperations(context.Context, string) ([]api.PendingOperation, error) {
	return r.queued, r.call("RackOperations")
}

func (r *rackRegion) ReleaseRackOperations(_ context.Context, _ string, rel api.OperationsRelease) ([]api.PendingOperation, error) {
	r.releases = append(r.releases, rel)
	return rel.Operations, r.call("ReleaseRackOperations")
}

func transferActivities(t *testing.T, regions ...*rackRegion) *activities.Activities {
	t.Helper()
	configs := map[string]activities.RegionConfig{}
	byURL := map[string]*rackRegion{}
	for _, r := range regions {
		info, _ := r.Info(context.Background())
		configs[info.Name] = activities.RegionConfig{URL: info.URL}
		byURL[info.URL] = r
	}
	res, err := activities.NewRegions(configs, func(rc activities.RegionConfig) activities.Region { return byURL[rc.URL] })
	if err != nil {
		t.Fatal(err)
	}
	return &activities.Activities{Regions: res}
}

func sourceBundle() api.RackBundle {
	return api.RackBundle{
		Rack:     api.Rack{Uuid: rackUUID, Name: "rack-a"},
		Subnets:  []api.Subnet{{Uuid: "5b000000-0000-4000-8000-000000000001", CIDR: "10.42.0.0/24"}},
		Machines: []api.RackMachine{{Uuid: "m-1", Name: "node-01"}, {Uuid: "m-2", Name: "node-02"}},
	}
}

func TestValidateTransfer(t *testing.T) {
	in := activities.TransferInput{SourceRegion: "east", TargetRegion: "west", Rack: rackUUID}
	cases := []struct {
		name    string
		setup   func(east, west *rackRegion)
		in      activities.TransferInput
		errType string // "" and retryable: a transient failure
		errText string
	}{
		{name: "ok", setup: func(*rackRegion, *rackRegion) {}},
		{name: "same region", in: activities.TransferInput{SourceRegion: "east", TargetRegion: "east", Rack: rackUUID}, errType: activities.ErrTypeRegionMismatch},
		{name: "unknown rack", setup: func(east, _ *rackRegion) { east.rack = nil }, errType: activities.ErrTypeRackNotFound, errText: "not found on region east"},
		{name: "offline rack", setup: func(east, _ *rackRegion) { east.rack.Status = api.RackOffline }, errType: activities.ErrTypeRackNotOnline, errText: "is offline"},
		{name: "paused rack", setup: func(east, _ *rackRegion) { east.rack.Status = api.RackPaused }, errType: activities.ErrTypeRackNotOnline, errText: "is paused"},
		{name: "conflicts", setup: func(_, west *rackRegion) {
			west.conflicts = []string{"subnet 10.42.0.0/24 exists as subnet x", "machine name node-01 is used by machine y"}
		}, errType: activities.ErrTypeDestinationConflict, errText: "subnet 10.42.0.0/24 exists as subnet x; machine name node-01 is used by machine y"},
		{name: "shared VLAN", setup: func(east, _ *rackRegion) { east.fail["ExportRack"] = http.StatusConflict }, errType: activities.ErrTypeRegionRefused, errText: "ExportRack failed"},
		{name: "target down", setup: func(_, west *rackRegion) { west.fail["CheckRackImport"] = http.StatusServiceUnavailable }, errText: "CheckRackImport failed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			east := newRackRegion("east", &api.Rack{Uuid: rackUUID, Name: "rack-a", Status: api.RackOnline})
			east.bundle = sourceBundle()
			west := newRackRegion("west", nil)
			if c.setup != nil {
				c.setup(east, west)
			}
			run := in
			if c.in != (activities.TransferInput{}) {
				run = c.in
			}
			plan, err := transferActivities(t, east, west).ValidateTransfer(context.Background(), run)
			if c.errType == "" && c.errText == "" {
				if err != nil {
					t.Fatal(err)
				}
				if plan.RackName != "rack-a" || !slices.Equal(plan.Machines, []string{"m-1", "m-2"}) || plan.Subnets != 1 ||
					!slices.Equal(plan.TargetEndpoints, []string{"https://west.example:5240"}) {
					t.Errorf("plan %+v", plan)
				}
				return
			}
			var appErr *temporal.ApplicationError
			isApp := errors.As(err, &appErr)
			switch {
			case err == nil:
				t.Fatal("validation passed")
			case c.errType == "" && isApp && appErr.NonRetryable():
				t.Errorf("transient failure is final: %v", err)
			case c.errType != "" && (!isApp || appErr.Type() != c.errType || !appErr.NonRetryable()):
				t.Errorf("error %v, want a final %s", err, c.errType)
			case !strings.Contains(err.Error(), c.errText):
				t.Errorf("error %q does not say %q", err, c.errText)
			}
			if slices.Contains(east.calls, "PauseRack") || len(west.imported) > 0 {
				t.Error("validation changed a region")
			}
		})
	}
}

func TestCopyRackMovesTheSourceBundle(t *testing.T) {
	east, west := newRackRegion("east", nil), newRackRegion("west", nil)
	east.bundle = sourceBundle()
	res, err := transferActivities(t, east, west).CopyRack(context.Background(), activities.TransferInput{SourceRegion: "east", TargetRegion: "west", Rack: rackUUID})
	if err != nil || res.Subnets != 1 || len(west.imported) != 1 || west.imported[0].Rack.Uuid != rackUUID {
		t.Fatalf("copy %+v, %v; imported %+v", res, err, west.imported)
	}
}

// Undoing and removing what is already gone succeeds: compensations and retries may run
// after the effect.
func TestRackStepsTolerateWhatIsGone(t *testing.T) {
	east := newRackRegion("east", nil)
	east.fail["UnpauseRack"], east.fail["HandOverRack"] = http.StatusNotFound, http.StatusNotFound
	acts := transferActivities(t, east)
	ref := activities.RackRef{Region: "east", Rack: rackUUID}
	if err := acts.UnpauseRack(context.Background(), ref); err != nil {
		t.Error(err)
	}
	if err := acts.HandOverRack(context.Background(), ref); err != nil {
		t.Error(err)
	}
	east.fail["HandOverRack"] = http.StatusConflict
	if err := acts.HandOverRack(context.Background(), ref); err == nil {
		t.Error("a refused hand-over succeeded")
	}
}

func TestReleaseRackHandsOperationsOver(t *testing.T) {
	east, west := newRackRegion("east", nil), newRackRegion("west", nil)
	east.queued = []api.PendingOperation{{ID: 7, Target: "m-1", Kind: "power-on"}}
	res, err := transferActivities(t, east, west).ReleaseRack(context.Background(), activities.TransferInput{SourceRegion: "east", TargetRegion: "west", Rack: rackUUID})
	if err != nil || res.Released != 1 {
		t.Fatalf("release %+v, %v", res, err)
	}
	if len(west.releases) != 1 || west.releases[0].Origin != "east" || len(west.releases[0].Operations) != 1 {
		t.Errorf("target releases %+v", west.releases)
	}
	if len(east.releases) != 1 || east.releases[0].Origin != "" || len(east.releases[0].Operations) != 0 {
		t.Errorf("source releases %+v: want its own queue marked", east.releases)
	}
	if !slices.Contains(west.calls, "UnpauseRack") {
		t.Error("the rack stays paused on the target")
	}
}
