package activities

import (
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"

	"sigs.k8s.io/yaml"

	"github.com/ironflow/ironflow/region/client"
)

// RegionConfig is how the worker reaches one region. The token stays in worker configuration:
// workflow inputs name regions, they never carry credentials.
type RegionConfig struct {
	URL   string `json:"url"`
	Token string `json:"token"`
}

// regionsFile is the YAML (or JSON) regions file:
//
//	regions:
//	  east: {url: "https://east.example:5240", token: "..."}
//	  west: {url: "https://west.example:5240", token: "..."}
type regionsFile struct {
	Regions map[string]RegionConfig `json:"regions"`
}

// Regions resolves region names and URLs to Region clients, made on first use and reused.
type Regions struct {
	configs map[string]RegionConfig // by name
	byURL   map[string]string       // normalised URL -> name
	dial    func(RegionConfig) Region

	mu      sync.Mutex
	clients map[string]Region // by name
}

// DialClient makes a Region backed by the region HTTP client.
func DialClient(rc RegionConfig) Region {
	return ClientRegion{Client: client.New(rc.URL, rc.Token, client.AsMove())}
}

// LoadRegions reads a regions file and returns a resolver whose clients are made by DialClient.
func LoadRegions(path string) (*Regions, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("regions file: %w", err)
	}
	var f regionsFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("regions file %s: %w", path, err)
	}
	r, err := NewRegions(f.Regions, DialClient)
	if err != nil {
		return nil, fmt.Errorf("regions file %s: %w", path, err)
	}
	return r, nil
}

// MarshalRegions returns the regions file, in the format LoadRegions reads, that lists configs.
func MarshalRegions(configs map[string]RegionConfig) ([]byte, error) {
	data, err := yaml.Marshal(regionsFile{Regions: configs})
	if err != nil {
		return nil, fmt.Errorf("regions file: %w", err)
	}
	return data, nil
}

// NewRegions checks configs (every region has a name and an absolute http(s) URL, no URL is
// listed twice) and returns a resolver that makes clients with dial.
func NewRegions(configs map[string]RegionConfig, dial func(RegionConfig) Region) (*Regions, error) {
	if len(configs) == 0 {
		return nil, fmt.Errorf("no regions configured")
	}
	r := &Regions{
		configs: make(map[string]RegionConfig, len(configs)),
		byURL:   make(map[string]string, len(configs)),
		dial:    dial,
		clients: make(map[string]Region, len(configs)),
	}
	names := make([]string, 0, len(configs))
	for name := range configs {
		names = append(names, name)
	}
	sort.Strings(names) // stable error messages
	for _, name := range names {
		rc := configs[name]
		if strings.TrimSpace(name) == "" {
			return nil, fmt.Errorf("a region has an empty name")
		}
		u, err := url.Parse(rc.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("region %q: url %q is not an absolute http(s) URL", name, rc.URL)
		}
		key := normaliseURL(rc.URL)
		if other, dup := r.byURL[key]; dup {
			return nil, fmt.Errorf("regions %q and %q have the same url %s", other, name, rc.URL)
		}
		r.byURL[key] = name
		r.configs[name] = rc
	}
	return r, nil
}

// Region returns the client of the region named nameOrURL, or of the region whose configured
// URL is nameOrURL (ticket endpoints name regions by URL). Unknown regions are a
// non-retryable error: the worker configuration must change first.
func (r *Regions) Region(nameOrURL string) (Region, error) {
	name, ok := nameOrURL, false
	if _, ok = r.configs[name]; !ok {
		name, ok = r.byURL[normaliseURL(nameOrURL)]
	}
	if !ok {
		return nil, nonRetryable(ErrTypeUnknownRegion, "region %q is not in this worker's regions file", nameOrURL)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.clients[name]
	if !ok {
		c = r.dial(r.configs[name])
		r.clients[name] = c
	}
	return c, nil
}

func normaliseURL(s string) string {
	return strings.ToLower(strings.TrimRight(strings.TrimSpace(s), "/"))
}
