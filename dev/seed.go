package dev

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

//go:embed seeddata/*.json
var seedData embed.FS

// SeedMachine is the seed's machine "birdy" on region-a (Digital Rebar migration doc).
const SeedMachine = "01d8828f-2f7d-4a1c-a1fa-f668274c7c44"

var seeder = store.Principal{User: "dev-seed", Role: api.RoleAdmin}

// SeedBirdy returns the seed's birdy machine and its two jobs, exactly as the seed shows them.
func SeedBirdy() (api.Machine, []api.Job, error) {
	var m api.Machine
	var jobs []api.Job
	if err := readSeed("birdy.json", &m); err != nil {
		return m, nil, err
	}
	err := readSeed("birdy-jobs.json", &jobs)
	return m, jobs, err
}

// seed loads the seed's objects into the regions once: a restarted dev stack keeps its state
// (a migrated birdy must not come back on region-a).
func (s *Stack) seed(ctx context.Context) error {
	marker := filepath.Join(s.StateDir, "seeded")
	if _, err := os.Stat(marker); err == nil {
		return nil
	}
	var profiles map[string][]api.Profile
	var machines map[string][]api.Machine
	if err := readSeed("profiles.json", &profiles); err != nil {
		return err
	}
	if err := readSeed("machines.json", &machines); err != nil {
		return err
	}
	birdy, jobs, err := SeedBirdy()
	if err != nil {
		return err
	}
	for _, name := range RegionNames {
		st := s.Regions[name].Store
		for i := range profiles[name] {
			if err := st.Create(ctx, seeder, api.KindProfiles, &profiles[name][i]); err != nil {
				return fmt.Errorf("seed %s: %w", name, err)
			}
		}
		if name == "region-a" {
			machines[name] = append([]api.Machine{birdy}, machines[name]...)
		}
		for i := range machines[name] {
			if err := st.Create(ctx, seeder, api.KindMachines, &machines[name][i]); err != nil {
				return fmt.Errorf("seed %s: %w", name, err)
			}
		}
		if name == "region-a" {
			for i := range jobs {
				if err := st.Create(ctx, seeder, api.KindJobs, &jobs[i]); err != nil {
					return fmt.Errorf("seed %s: %w", name, err)
				}
			}
		}
	}
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		return fmt.Errorf("seed marker: %w", err)
	}
	return nil
}

func readSeed(name string, v any) error {
	b, err := seedData.ReadFile("seeddata/" + name)
	if err != nil {
		return fmt.Errorf("seed data %s: %w", name, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("seed data %s: %w", name, err)
	}
	return nil
}
