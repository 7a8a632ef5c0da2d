package regiontest

import (
	"testing"

	"github.com/ironflow/ironflow/activities"
)

// Resolver returns the worker's resolver over fake regions, found by name or URL.
func Resolver(t testing.TB, regions ...*Region) *activities.Regions {
	t.Helper()
	configs := map[string]activities.RegionConfig{}
	byURL := map[string]*Region{}
	for _, r := range regions {
		configs[r.info.Name] = activities.RegionConfig{URL: r.info.URL, Token: "token-" + r.info.Name}
		byURL[r.info.URL] = r
	}
	res, err := activities.NewRegions(configs, func(rc activities.RegionConfig) activities.Region { return byURL[rc.URL] })
	if err != nil {
		t.Fatal(err)
	}
	return res
}
