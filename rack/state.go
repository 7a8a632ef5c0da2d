// Package rack is the rack controller process: registration with a region, and Serve, which
// runs the region link, heartbeats, the lease table and its sync, DHCP, TFTP, HTTP boot and
// the rack's Temporal worker under one errgroup. It keeps serving with every region down,
// also after a restart: the config comes from the region link's cache and the leases from
// their write-ahead log.
package rack

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ironflow/ironflow/internal/atomicfile"
	"github.com/ironflow/ironflow/region/api"
)

// DefaultStateDir is where a rack keeps its identity, config cache and leases.
const DefaultStateDir = "/var/lib/ironflow/rack"

// State is the rack's identity with its region, kept in the state directory.
type State struct {
	Uuid      string   `json:"Uuid"`
	Name      string   `json:"Name"`
	Token     string   `json:"Token"`     // the rack's API token with Region
	Endpoints []string `json:"Endpoints"` // region URLs the rack was registered with, preferred first
	Region    api.Info `json:"Region"`    // the region that registered it
}

// Files and directories under the state directory.
const (
	stateFile = "rack.json"
	linkDir   = "region" // regionlink: endpoint list and config cache
	leasesDir = "leases" // the lease write-ahead log
)

// ErrNotRegistered means the state directory holds no registration.
var ErrNotRegistered = errors.New("rack is not registered (run `ironflow rack register`)")

// LoadState reads the registration in dir.
func LoadState(dir string) (State, error) {
	path := filepath.Join(dir, stateFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return State{}, fmt.Errorf("%w: no %s", ErrNotRegistered, path)
	}
	if err != nil {
		return State{}, fmt.Errorf("rack state: %w", err)
	}
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return State{}, fmt.Errorf("rack state %s: %w", path, err)
	}
	if st.Uuid == "" || st.Token == "" || len(st.Endpoints) == 0 {
		return State{}, fmt.Errorf("rack state %s: incomplete (Uuid, Token and Endpoints are required)", path)
	}
	return st, nil
}

// saveState replaces the registration in dir atomically (readable by root only: it holds
// the token).
func saveState(dir string, st State) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode rack state: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("rack state dir: %w", err)
	}
	return atomicfile.Write(filepath.Join(dir, stateFile), data)
}
