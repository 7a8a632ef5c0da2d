package activities

import (
	"context"
	"net/url"
	"slices"

	"github.com/ironflow/ironflow/region/api"
)

// RackMachinesInput asks for up to Limit machines behind Rack on Region whose UUID sorts after
// After ("" for the first).
type RackMachinesInput struct {
	Region string
	Rack   string // UUID
	After  string `json:",omitempty"`
	Limit  int
}

// RackMachines lists, in UUID order, the machines behind a rack still on a region (stubs of
// machines migrated away are left out) after in.After, at most in.Limit of them: the machines
// a transfer that continued as new has left to migrate. Only UUIDs are returned, so the
// workflow's history stays small.
func (a *Activities) RackMachines(ctx context.Context, in RackMachinesInput) ([]string, error) {
	if in.Limit < 1 {
		return nil, nonRetryable(ErrTypeInvalidSelector, "a limit of %d machines lists nothing", in.Limit)
	}
	machines, err := a.rackMachines(ctx, in.Region, in.Rack)
	if err != nil {
		return nil, err
	}
	var uuids []string
	for _, m := range machines {
		if m.Meta[api.MetaRedirectEndpoint] == "" && m.Uuid > in.After {
			uuids = append(uuids, m.Uuid)
		}
	}
	slices.Sort(uuids)
	return uuids[:min(len(uuids), in.Limit)], nil
}

// rackMachines lists every machine behind rack on region, with the region's list filter.
func (a *Activities) rackMachines(ctx context.Context, region, rack string) ([]api.Machine, error) {
	r, err := a.Regions.Region(region)
	if err != nil {
		return nil, err
	}
	lister, ok := r.(MachineLister)
	if !ok {
		return nil, nonRetryable(ErrTypeInvalidSelector, "region %s cannot list machines (%T has no ListMachines)", region, r)
	}
	machines, err := lister.ListMachines(ctx, url.Values{"Rack": {rack}})
	return machines, classify(err, "list machines of rack %s on %s", rack, region)
}
