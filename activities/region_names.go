package activities

import (
	"context"
	"maps"
	"slices"
)

// Names returns the names of the regions in the regions file, sorted.
func (r *Regions) Names() []string {
	return slices.Sorted(maps.Keys(r.configs))
}

// RegionNames answers with the regions this worker can migrate between, for clients that
// check a region name before they start a workflow (workflows.ListRegions).
func (a *Activities) RegionNames(context.Context) ([]string, error) {
	return a.Regions.Names(), nil
}
