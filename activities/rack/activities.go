// Package rack holds the activities that run inside a rack controller, on the rack's own
// task queue (TaskQueue): the transfer-rack workflow asks the rack for its
// state, has it push its leases to the region, and moves it to the target region. Payloads
// carry names, URLs and counts only: no leases, no tokens, no secrets.
package rack

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/activities/heartbeat"
	"github.com/ironflow/ironflow/region/api"
)

// TaskQueue is the task queue of the worker running inside one rack controller; it lives
// here, with the activities that worker runs, so the rack needs nothing from workflows.
func TaskQueue(rackUUID string) string { return "rack/" + rackUUID }

// Serving says which services of the rack are running.
type Serving struct {
	DHCP bool `json:"DHCP"`
	TFTP bool `json:"TFTP"`
	HTTP bool `json:"HTTP"`
}

// State is what ReportState returns.
type State struct {
	Uuid          string   `json:"Uuid"`
	Name          string   `json:"Name"`
	Region        string   `json:"Region"`        // name of the region the rack registered with
	CurrentRegion string   `json:"CurrentRegion"` // the endpoint the rack talks to first
	Endpoints     []string `json:"Endpoints"`
	ActiveLeases  int      `json:"ActiveLeases"`
	Serving       Serving  `json:"Serving"`
}

// Controller is the running rack controller (implemented by package rack).
type Controller interface {
	State() State
	// ExportLeases pushes every lease to the current region and returns how many.
	ExportLeases(ctx context.Context) (int, error)
	// MoveToRegion registers the rack with the region at urls using secret, stores the new
	// registration and swaps the rack's region endpoints and token at once. DHCP, TFTP and
	// HTTP keep serving throughout.
	MoveToRegion(ctx context.Context, urls []string, secret string) (api.Info, error)
}

// SwapRegionEndpointsInput names the target region. Secret is the name of the target's rack
// secret in the rack's worker configuration, never the secret itself (workflow histories are
// stored in plain text).
type SwapRegionEndpointsInput struct {
	URLs   []string `json:"URLs"`
	Secret string   `json:"Secret"`
}

// SwapRegionEndpointsResult describes the region the rack now belongs to.
type SwapRegionEndpointsResult struct {
	Region     string   `json:"Region"`
	RegionUuid string   `json:"RegionUuid"`
	Endpoints  []string `json:"Endpoints"`
}

// ExportLeasesResult counts the leases pushed to the region.
type ExportLeasesResult struct {
	Exported int `json:"Exported"`
}

// Application error types (temporal.ApplicationError.Type()) of non-retryable failures;
// the values are recorded in histories and must never change.
const (
	ErrTypeInvalidInput        = "InvalidInput"
	ErrTypeUnknownSecret       = "UnknownSecret"
	ErrTypeRegistrationRefused = "RegistrationRefused"
)

// Activities are the rack-local activities.
type Activities struct {
	rack    Controller
	secrets map[string]string // rack secrets of regions, by name
	pods    Pods
	power   Power
}

// New returns the activities of rack; secrets maps names to the rack secrets of the regions
// the rack may be moved to, pods is how it reaches the pods it hosts.
func New(rack Controller, secrets map[string]string, pods Pods) *Activities {
	return &Activities{rack: rack, secrets: secrets, pods: pods}
}

// ReportState returns the rack's identity, region, lease count and which services run.
func (a *Activities) ReportState(_ context.Context) (State, error) {
	return a.rack.State(), nil
}

// ExportLeases pushes all the rack's leases to its current region (an idempotent upsert)
// and returns how many.
func (a *Activities) ExportLeases(ctx context.Context) (ExportLeasesResult, error) {
	n, err := a.rack.ExportLeases(ctx)
	if err != nil {
		return ExportLeasesResult{}, fmt.Errorf("export leases: %w", err)
	}
	return ExportLeasesResult{Exported: n}, nil
}

// SwapRegionEndpoints moves the rack to the region at in.URLs, heartbeating so a cancelled
// transfer waits for it before it undoes anything. Running it again after it
// succeeded registers again (same rack UUID, fresh token) and changes nothing else.
func (a *Activities) SwapRegionEndpoints(ctx context.Context, in SwapRegionEndpointsInput) (SwapRegionEndpointsResult, error) {
	if err := validURLs(in.URLs); err != nil {
		return SwapRegionEndpointsResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeInvalidInput, nil)
	}
	secret, ok := a.secrets[in.Secret]
	if !ok || secret == "" {
		return SwapRegionEndpointsResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("no rack secret named %q in the rack's configuration", in.Secret), ErrTypeUnknownSecret, nil)
	}
	var info api.Info
	err := heartbeat.While(ctx, func(ctx context.Context) error {
		var err error
		info, err = a.rack.MoveToRegion(ctx, in.URLs, secret)
		return err
	})
	var p permanent
	if errors.As(err, &p) && p.Permanent() {
		return SwapRegionEndpointsResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeRegistrationRefused, err)
	}
	if err != nil {
		return SwapRegionEndpointsResult{}, fmt.Errorf("move rack to %v: %w", in.URLs, err)
	}
	return SwapRegionEndpointsResult{Region: info.Name, RegionUuid: info.Uuid, Endpoints: a.rack.State().Endpoints}, nil
}

// permanent is implemented by errors that retrying cannot fix, such as a region refusing the
// registration.
type permanent interface{ Permanent() bool }

func validURLs(urls []string) error {
	if len(urls) == 0 {
		return errors.New("no region URL given")
	}
	for _, s := range urls {
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("region URL %q is not an absolute http(s) URL", s)
		}
	}
	return nil
}
