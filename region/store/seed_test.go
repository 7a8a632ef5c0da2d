package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

const seedFile = "/work/shared/seeds/001_f6cb3cbade8ba0e8.txt"

// seedJSON returns the first JSON value printed after the shell line `after` in the seed.
func seedJSON(t *testing.T, seed, after string) json.RawMessage {
	t.Helper()
	i := strings.Index(seed, after+"\n")
	if i < 0 {
		t.Fatalf("seed has no line %q", after)
	}
	var raw json.RawMessage
	if err := json.NewDecoder(strings.NewReader(seed[i+len(after)+1:])).Decode(&raw); err != nil {
		t.Fatalf("JSON after %q: %v", after, err)
	}
	return raw
}

// sameFields checks that every field of want has byte-for-byte the same JSON value in got,
// and that got adds only the named fields.
func sameFields(t *testing.T, what string, want, got json.RawMessage, extra ...string) {
	t.Helper()
	var w, g map[string]json.RawMessage
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatal(err)
	}
	for field, wv := range w {
		var wc, gc bytes.Buffer
		if err := json.Compact(&wc, wv); err != nil {
			t.Fatal(err)
		}
		if err := json.Compact(&gc, g[field]); err != nil {
			t.Fatalf("%s.%s missing: %v", what, field, err)
		}
		if wc.String() != gc.String() {
			t.Errorf("%s.%s = %s, seed has %s", what, field, gc.String(), wc.String())
		}
	}
	for field := range g {
		if _, ok := w[field]; !ok && !slices.Contains(extra, field) {
			t.Errorf("%s has field %s that the seed does not", what, field)
		}
	}
}

// TestSeedRoundTrip stores the seed's birdy machine and its two jobs and reads them back with
// the exact JSON of the seed, including job timestamps with nanoseconds and their -04:00 offset.
func TestSeedRoundTrip(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(seedFile)
	if err != nil {
		t.Skipf("seed not available: %v", err)
	}
	seed := string(b)
	machineJSON := seedJSON(t, seed, "[admin@drp1 ~]$ drpcli machines show Name:birdy")
	jobsJSON := seedJSON(t, seed, "[admin@drp1 ~]$ drpcli jobs list Machine=01d8828f-2f7d-4a1c-a1fa-f668274c7c44")

	s, _ := newStore(t)
	ctx := context.Background()
	mustCreate(t, s, api.KindProfiles, &api.Profile{Name: "example-profile"})
	mustCreate(t, s, api.KindProfiles, &api.Profile{Name: "conflicting-profile", Params: map[string]any{"drp1-only-param": true}})
	var m api.Machine
	if err := json.Unmarshal(machineJSON, &m); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, api.KindMachines, &m)
	var seedJobs []json.RawMessage
	if err := json.Unmarshal(jobsJSON, &seedJobs); err != nil {
		t.Fatal(err)
	}
	for i := len(seedJobs) - 1; i >= 0; i-- { // stored newest first: List must order by StartTime
		var j api.Job
		if err := json.Unmarshal(seedJobs[i], &j); err != nil {
			t.Fatal(err)
		}
		mustCreate(t, s, api.KindJobs, &j)
	}

	var got api.Machine
	if err := s.Get(ctx, api.KindMachines, "Name:birdy", &got); err != nil {
		t.Fatal(err)
	}
	sameFields(t, "machine", machineJSON, json.RawMessage(jsonOf(t, got)), "Rack", "Pod", "Region")

	var jobs []api.Job
	if err := s.List(ctx, api.KindJobs, store.ListOptions{Filters: map[string]string{"Machine": m.Uuid}}, &jobs); err != nil {
		t.Fatal(err)
	}
	if len(jobs) != len(seedJobs) {
		t.Fatalf("%d jobs, seed has %d", len(jobs), len(seedJobs))
	}
	for i := range jobs {
		sameFields(t, "job "+jobs[i].Uuid, seedJobs[i], json.RawMessage(jsonOf(t, jobs[i])))
	}
	if !strings.Contains(jsonOf(t, jobs[1]), `"EndTime":"2022-09-15T15:23:04.49280118-04:00"`) {
		t.Fatalf("job timestamps lost their precision or offset: %s", jsonOf(t, jobs[1]))
	}
}
