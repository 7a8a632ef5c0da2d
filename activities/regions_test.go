package activities_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/region/api"
)

// infoServer answers /api/v1/info with name and the bearer token it received.
func infoServer(t *testing.T, name string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/info" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(api.Info{Name: name, Version: r.Header.Get("Authorization")})
	}))
	t.Cleanup(s.Close)
	return s
}

func TestLoadRegions(t *testing.T) {
	east, west := infoServer(t, "east"), infoServer(t, "west")
	tests := []struct {
		name    string
		file    string
		wantErr string
	}{
		{"yaml", fmt.Sprintf("regions:\n  east: {url: %q, token: t-east}\n  west:\n    url: %s/\n    token: t-west\n", east.URL, west.URL), ""},
		{"json", fmt.Sprintf(`{"regions": {"east": {"url": %q, "token": "t-east"}, "west": {"url": %q, "token": "t-west"}}}`, east.URL, west.URL), ""},
		{"empty", "regions: {}\n", "no regions configured"},
		{"relative url", "regions:\n  east: {url: east.example}\n", `region "east": url "east.example" is not an absolute http(s) URL`},
		{"duplicate url", "regions:\n  east: {url: \"https://x:1\"}\n  west: {url: \"https://X:1/\"}\n", `regions "east" and "west" have the same url`},
		{"unknown field", "regions:\n  east: {url: \"https://x:1\", tokn: a}\n", `unknown field "tokn"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "regions.yaml")
			if err := os.WriteFile(path, []byte(tt.file), 0o600); err != nil {
				t.Fatal(err)
			}
			regions, err := activities.LoadRegions(path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for key, want := range map[string]string{"east": "east", "west": "west", west.URL: "west", strings.ToUpper(east.URL) + "/": "east"} {
				r, err := regions.Region(key)
				if err != nil {
					t.Errorf("Region(%q): %v", key, err)
					continue
				}
				info, err := r.Info(context.Background())
				if err != nil || info.Name != want || info.Version != "Bearer t-"+want {
					t.Errorf("Region(%q) reached %+v (%v), want %s with its token", key, info, err, want)
				}
			}
			if _, err := regions.Region("mars"); !hasType(err, activities.ErrTypeUnknownRegion) {
				t.Errorf("unknown region: %v", err)
			}
		})
	}
}

// RegionNames is what ListRegions answers: the names of the regions file, sorted.
func TestRegionNames(t *testing.T) {
	regions, err := activities.NewRegions(map[string]activities.RegionConfig{
		"west": {URL: "https://west.example:5240"}, "east": {URL: "https://east.example:5240"},
	}, activities.DialClient)
	if err != nil {
		t.Fatal(err)
	}
	names, err := (&activities.Activities{Regions: regions}).RegionNames(context.Background())
	if err != nil || strings.Join(names, ",") != "east,west" {
		t.Errorf("RegionNames = %v, %v", names, err)
	}
}

// TestMarshalRegionsRoundTrips writes a regions file with MarshalRegions and reads it back,
// with values YAML would misread if they were written by hand (a colon, quotes, a #).
func TestMarshalRegionsRoundTrips(t *testing.T) {
	east := infoServer(t, "east")
	token := `t: "x" #y`
	data, err := activities.MarshalRegions(map[string]activities.RegionConfig{"east": {URL: east.URL, Token: token}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "regions.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	regions, err := activities.LoadRegions(path)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	r, err := regions.Region("east")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := r.Info(context.Background()); err != nil || info.Version != "Bearer "+token {
		t.Errorf("region east reached %+v (%v), want it with token %q", info, err, token)
	}
}
