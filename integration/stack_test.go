// Package integration holds end-to-end tests: real PostgreSQL, a real Temporal dev server,
// real region processes and sockets, driven through dev.Stack like `ironflow dev` is.
package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/ironflow/ironflow/dev"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

// startStack starts a fresh dev stack for one test and stops it when the test ends.
func startStack(t *testing.T, opts dev.StackOptions) *dev.Stack {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: starts PostgreSQL and the Temporal dev server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	opts.TemporalUIPort = -1
	stack, err := dev.StartStack(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stack.Stop)
	return stack
}

func regionClient(s *dev.Stack, name string) *client.Client {
	return client.New(s.Regions[name].URL, s.AdminToken)
}

func TestStackServesTheSeed(t *testing.T) {
	s := startStack(t, dev.StackOptions{Seed: true})
	ctx := context.Background()
	a, b := regionClient(s, "region-a"), regionClient(s, "region-b")

	if got := seedStoryNames(ctx, t, a); !equal(got, []string{"birdy", "drp1.rackn", "drp2.rackn"}) {
		t.Errorf("region-a machines = %v, want the seed's drp1 list", got)
	}
	if got := seedStoryNames(ctx, t, b); !equal(got, []string{"drp2.rackn"}) {
		t.Errorf("region-b machines = %v, want the seed's drp2 list", got)
	}

	birdy, err := a.Machines().Get(ctx, "Name:birdy")
	if err != nil {
		t.Fatal(err)
	}
	assertJSONEqualsFile(t, birdy, "../dev/seeddata/birdy.json")

	behindRack, err := a.Machines().List(ctx, url.Values{"Rack": {s.Racks["rack-a"].Uuid}})
	if err != nil {
		t.Fatal(err)
	}
	if len(behindRack) != dev.RackMachines {
		t.Errorf("rack-a has %d machines, want %d", len(behindRack), dev.RackMachines)
	}

	for name, rk := range s.Racks {
		resp, err := http.Get(rk.HTTPURL + "/healthz")
		if err != nil {
			t.Fatalf("%s HTTP boot: %v", name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s /healthz = %d", name, resp.StatusCode)
		}
		testutil.Eventually(t, 30*time.Second, name+" online on its region", func() bool {
			r, err := regionClient(s, rk.Region).Racks().Get(ctx, rk.Uuid)
			return err == nil && r.Status == "online"
		})
	}

	// Racks register with the region's rack secret, which admins read through the API.
	secret, err := a.RackSecret(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := s.Regions["region-a"].Store.RackSecret(ctx); secret.Secret == "" || secret.Secret != want {
		t.Errorf("rack secret from the API %q, store has %q", secret.Secret, want)
	}

	// The audit log and the leases, through the CLI as an operator reads them.
	var events []api.Event
	runCLIJSON(t, s, &events, "-E", s.Regions["region-a"].URL, "events", "list", "Kind=machines", "limit=3")
	if len(events) != 3 || events[0].Actor != "dev-seed" || events[0].Action != "create" {
		t.Errorf("events list Kind=machines limit=3 = %+v", events)
	}
	var leases []api.Lease
	runCLIJSON(t, s, &leases, "-E", s.Regions["region-a"].URL, "leases", "list")

	info, err := b.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "region-b" || info.URL != s.Regions["region-b"].URL || len(info.Endpoints) == 0 {
		t.Errorf("region-b info = %+v", info)
	}
}

// assertJSONEqualsFile compares v's JSON with the JSON in file, field by field.
func assertJSONEqualsFile(t *testing.T, v any, file string) {
	t.Helper()
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	assertJSONEquals(t, v, want)
}

func assertJSONEquals(t *testing.T, v any, want []byte) {
	t.Helper()
	got, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var gotDoc, wantDoc any
	if err := json.Unmarshal(got, &gotDoc); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(want, &wantDoc); err != nil {
		t.Fatal(err)
	}
	for _, d := range jsonDiff("", gotDoc, wantDoc) {
		t.Error(d)
	}
}

// jsonDiff lists the differences between two decoded JSON documents, field by field.
func jsonDiff(path string, got, want any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			break
		}
		var out []string
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				out = append(out, fmt.Sprintf("%s.%s: missing", path, k))
				continue
			}
			out = append(out, jsonDiff(path+"."+k, gv, wv)...)
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				out = append(out, fmt.Sprintf("%s.%s: unexpected field", path, k))
			}
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			break
		}
		var out []string
		for i := range w {
			out = append(out, jsonDiff(fmt.Sprintf("%s[%d]", path, i), g[i], w[i])...)
		}
		return out
	}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if string(gb) != string(wb) {
		return []string{fmt.Sprintf("%s = %s, want %s", path, gb, wb)}
	}
	return nil
}

// runCLIJSON runs the ironflow CLI with the stack's admin token and decodes its JSON output.
func runCLIJSON(t *testing.T, s *dev.Stack, out any, args ...string) {
	t.Helper()
	cmd := exec.Command(buildIronflow(t), append(args, "-o", "json")...)
	cmd.Env = append(os.Environ(), "IRONFLOW_TOKEN="+s.AdminToken)
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("ironflow %v: %v", args, err)
	}
	if err := json.Unmarshal(stdout, out); err != nil {
		t.Fatalf("ironflow %v printed %q: %v", args, stdout, err)
	}
}

// seedStoryNames lists the names of the machines of the doc's story (pool default; the rack's
// machines have a pool of their own).
func seedStoryNames(ctx context.Context, t *testing.T, c *client.Client) []string {
	t.Helper()
	ms, err := c.Machines().List(ctx, url.Values{"Pool": {"default"}})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
