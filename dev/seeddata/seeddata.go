// Package seeddata is the dev stack's seed, as JSON: the Digital Rebar migration doc's
// machine birdy with its jobs, and the machines, profiles and tasks around it. The dev stack
// loads it; store and server tests read it without starting a stack.
package seeddata

import (
	"embed"
	"encoding/json"
	"fmt"

	"github.com/ironflow/ironflow/region/api"
)

//go:embed *.json
var files embed.FS

// BirdyUUID is the seed's machine "birdy" on region-a (Digital Rebar migration doc).
const BirdyUUID = "01d8828f-2f7d-4a1c-a1fa-f668274c7c44"

// Birdy returns the seed's birdy machine and its two jobs, exactly as the seed shows them.
func Birdy() (api.Machine, []api.Job, error) {
	var m api.Machine
	var jobs []api.Job
	if err := Read("birdy.json", &m); err != nil {
		return m, nil, err
	}
	err := Read("birdy-jobs.json", &jobs)
	return m, jobs, err
}

// Read decodes the seed file name (e.g. "machines.json") into v.
func Read(name string, v any) error {
	b, err := files.ReadFile(name)
	if err != nil {
		return fmt.Errorf("seed data %s: %w", name, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("seed data %s: %w", name, err)
	}
	return nil
}
