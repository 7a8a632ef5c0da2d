package server

import (
	"maps"
	"slices"
)

// RoutePatterns lists the pattern of every route the server registers, for tests that walk
// the route table.
func RoutePatterns() []string {
	return slices.Sorted(maps.Keys(New(nil, Config{}).patterns))
}
