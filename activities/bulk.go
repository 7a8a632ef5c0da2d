package activities

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"

	"github.com/ironflow/ironflow/region/api"
)

// ErrTypeInvalidSelector is the error type of a selector that selects nothing by construction.
const ErrTypeInvalidSelector = "InvalidSelector"

// Selector chooses machines on a region for a bulk migration: every machine of Pool and/or
// Rack (both given: machines in both), or the machines Names lists.
type Selector struct {
	Pool  string   `json:",omitempty"`
	Rack  string   `json:",omitempty"` // rack UUID
	Names []string `json:",omitempty"`
}

// Check refuses a selector with no criterion, with empty names, or mixing Names with
// Pool/Rack. It is pure, so workflows call it too.
func (s Selector) Check() error {
	switch {
	case s.Pool == "" && s.Rack == "" && len(s.Names) == 0:
		return errors.New("the selector is empty: give a pool, a rack or machine names")
	case len(s.Names) > 0 && (s.Pool != "" || s.Rack != ""):
		return errors.New("the selector mixes machine names with a pool or rack: give one or the other")
	case slices.Contains(s.Names, ""):
		return errors.New("the selector lists an empty machine name")
	}
	return nil
}

// String describes the selector for messages.
func (s Selector) String() string {
	var parts []string
	if s.Pool != "" {
		parts = append(parts, "pool "+s.Pool)
	}
	if s.Rack != "" {
		parts = append(parts, "rack "+s.Rack)
	}
	if len(s.Names) > 0 {
		parts = append(parts, "names "+strings.Join(s.Names, ","))
	}
	return strings.Join(parts, " and ")
}

// SelectInput names the region whose machines a Selector chooses.
type SelectInput struct {
	Region   string
	Selector Selector
	// TargetRegion and Grant: the region grants the bulk migration to TargetRegion (grants.go).
	TargetRegion string `json:",omitempty"`
	Grant        string `json:",omitempty"`
}

// MachineLister is what SelectMachines needs beyond Region: a filtered machine list.
// ClientRegion implements it; a Region without it cannot resolve pool or rack selectors.
type MachineLister interface {
	ListMachines(ctx context.Context, filters url.Values) ([]api.Machine, error)
}

// ListMachines lists the machines matching DRP-style exact-match filters.
func (c ClientRegion) ListMachines(ctx context.Context, filters url.Values) ([]api.Machine, error) {
	return c.Machines().List(ctx, filters)
}

// SelectMachines resolves a selector on a region into machine UUIDs, sorted and without
// duplicates so the workflow's order is deterministic. Locked stubs of machines already
// migrated away are left out of pool and rack selections (they stay in their pool after a
// migration that keeps its stub); a named machine that does not exist is a non-retryable
// error naming it. Only UUIDs are returned: workflow history stays small.
func (a *Activities) SelectMachines(ctx context.Context, in SelectInput) ([]string, error) {
	if err := in.Selector.Check(); err != nil {
		return nil, nonRetryable(ErrTypeInvalidSelector, "%v", err)
	}
	r, err := a.Regions.Region(in.Region)
	if err != nil {
		return nil, err
	}
	check := api.GrantCheck{Grant: in.Grant, TargetRegion: in.TargetRegion, Kind: api.GrantBulk, Migration: workflowID(ctx)}
	if _, err := verifyGrant(ctx, r, in.Region, check); err != nil {
		return nil, err
	}
	var uuids []string
	if len(in.Selector.Names) > 0 {
		uuids, err = byName(ctx, r, in.Region, in.Selector.Names)
	} else {
		uuids, err = byFilters(ctx, r, in.Region, in.Selector)
	}
	if err != nil {
		return nil, err
	}
	slices.Sort(uuids)
	return slices.Compact(uuids), nil
}

func byName(ctx context.Context, r Region, region string, names []string) ([]string, error) {
	uuids := make([]string, 0, len(names))
	var missing []string
	for _, name := range names {
		m, err := r.GetMachine(ctx, "Name:"+name)
		switch {
		case isNotFound(err):
			missing = append(missing, name)
		case err != nil:
			return nil, classify(err, "get machine %s on %s", name, region)
		default:
			uuids = append(uuids, m.Uuid)
		}
	}
	if len(missing) > 0 {
		return nil, nonRetryable(ErrTypeMachineNotFound, "machines not found on region %s: %s", region, strings.Join(missing, ", "))
	}
	return uuids, nil
}

func byFilters(ctx context.Context, r Region, region string, s Selector) ([]string, error) {
	lister, ok := r.(MachineLister)
	if !ok {
		return nil, nonRetryable(ErrTypeInvalidSelector, "region %s cannot list machines (%T has no ListMachines)", region, r)
	}
	filters := url.Values{}
	if s.Pool != "" {
		filters.Set("Pool", s.Pool)
	}
	if s.Rack != "" {
		filters.Set("Rack", s.Rack)
	}
	machines, err := lister.ListMachines(ctx, filters)
	if err != nil {
		return nil, classify(err, "list machines of %s on %s", s, region)
	}
	uuids := make([]string, 0, len(machines))
	for _, m := range machines {
		if m.Meta[api.MetaRedirectEndpoint] == "" {
			uuids = append(uuids, m.Uuid)
		}
	}
	return uuids, nil
}
