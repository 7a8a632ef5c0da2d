package rack

import (
	"context"
	"errors"
	"testing"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/ironflow/ironflow/region/api"
)

// fakeRack records moves and fails them with err.
type fakeRack struct {
	err     error
	moves   int
	secrets []string
}

func (f *fakeRack) State() State                              { return State{Endpoints: []string{"http://b:5240"}} }
func (f *fakeRack) ExportLeases(context.Context) (int, error) { return 3, f.err }
func (f *fakeRack) MoveToRegion(_ context.Context, _ []string, secret string) (api.Info, error) {
	f.moves++
	f.secrets = append(f.secrets, secret)
	return api.Info{Name: "region-b", Uuid: "b-uuid"}, f.err
}

type refusal struct{}

func (refusal) Error() string   { return "wrong rack secret" }
func (refusal) Permanent() bool { return true }

func TestSwapRegionEndpointsErrors(t *testing.T) {
	good := SwapRegionEndpointsInput{URLs: []string{"http://b:5240"}, Secret: "region-b"}
	cases := []struct {
		name      string
		in        SwapRegionEndpointsInput
		rackErr   error
		wantType  string // "" = success; "retryable" = a plain error Temporal retries
		wantMoves int
	}{
		{"moves", good, nil, "", 1},
		{"no URLs", SwapRegionEndpointsInput{Secret: "region-b"}, nil, ErrTypeInvalidInput, 0},
		{"relative URL", SwapRegionEndpointsInput{URLs: []string{"/api"}, Secret: "region-b"}, nil, ErrTypeInvalidInput, 0},
		{"unknown secret", SwapRegionEndpointsInput{URLs: good.URLs, Secret: "region-c"}, nil, ErrTypeUnknownSecret, 0},
		{"region refuses", good, refusal{}, ErrTypeRegistrationRefused, 1},
		{"region unreachable", good, errors.New("connection refused"), "retryable", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeRack{err: c.rackErr}
			res, err := New(f, map[string]string{"region-b": "s3cret"}, Pods{}).SwapRegionEndpoints(context.Background(), c.in)
			var appErr *temporal.ApplicationError
			switch {
			case c.wantType == "" && (err != nil || res.Region != "region-b" || res.RegionUuid != "b-uuid"):
				t.Fatalf("got %+v, %v", res, err)
			case c.wantType == "retryable" && (err == nil || errors.As(err, &appErr)):
				t.Fatalf("got %v, want a plain (retryable) error", err)
			case c.wantType != "" && c.wantType != "retryable" && (!errors.As(err, &appErr) || !appErr.NonRetryable() || appErr.Type() != c.wantType):
				t.Fatalf("got %v, want non-retryable %s", err, c.wantType)
			}
			if f.moves != c.wantMoves {
				t.Fatalf("%d moves, want %d", f.moves, c.wantMoves)
			}
			for _, s := range f.secrets {
				if s != "s3cret" {
					t.Fatalf("the rack got secret %q, want the one named in its configuration", s)
				}
			}
		})
	}
}

func TestExportLeasesCounts(t *testing.T) {
	res, err := New(&fakeRack{}, nil, Pods{}).ExportLeases(context.Background())
	if err != nil || res.Exported != 3 {
		t.Fatalf("%+v, %v", res, err)
	}
	if _, err := New(&fakeRack{err: errors.New("region down")}, nil, Pods{}).ExportLeases(context.Background()); err == nil {
		t.Fatal("a failed export succeeded")
	}
}

// The rack's worker registers the whole Activities struct: every exported method must be an
// activity (a helper method such as an option setter makes the registration panic and the
// rack's worker never start).
func TestActivitiesRegister(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	suite.NewTestActivityEnvironment().RegisterActivity(New(&fakeRack{}, nil, Pods{}))
}
