package integration

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/dev"
	"github.com/ironflow/ironflow/dev/seeddata"
	"github.com/ironflow/ironflow/region/api"
	regionclient "github.com/ironflow/ironflow/region/client"
	"github.com/ironflow/ironflow/workflows"
)

// TestMigrateBirdyMatchesTheSeed replays the Digital Rebar doc: birdy with its two jobs and
// the profiles example-profile and conflicting-profile moves from region-a to region-b with
// the ticket flow, and both sides end as the doc shows them.
func TestMigrateBirdyMatchesTheSeed(t *testing.T) {
	s := startStack(t, dev.StackOptions{Seed: true, RunWorker: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a, b := regionClient(s, "region-a"), regionClient(s, "region-b")
	target := s.Regions["region-b"].URL

	ticket, err := b.MintTicket(ctx, api.TicketRequest{})
	if err != nil {
		t.Fatal(err)
	}
	res := migrate(ctx, t, s, workflows.MigrateMachineInput{
		SourceRegion: "region-a", TargetRegion: "region-b", Machine: "Name:birdy", Ticket: ticket.Token,
	})
	if res.MachineUuid != seeddata.BirdyUUID || res.TargetEndpoint != target || res.Jobs != 2 {
		t.Errorf("result = %+v", res)
	}

	// The destination holds the live machine. Step 7 of README.md "How a migration behaves"
	// activates it (Runnable and Available true); the doc's snapshot was taken before DRP's agent re-activated it.
	want := seedFile(t, "seed-region-b-birdy-after.json", target)
	want = setFields(t, want, map[string]any{"Runnable": true, "Available": true})
	assertJSONEquals(t, getMachine(ctx, t, b, "Name:birdy"), want)
	assertJSONEquals(t, getMachine(ctx, t, a, "Name:birdy"), seedFile(t, "seed-region-a-birdy-after.json", target))
	assertJSONEquals(t, listJobs(ctx, t, b, seeddata.BirdyUUID), seedFile(t, "seed-region-b-jobs-after.json", target))
	assertJSONEquals(t, listJobs(ctx, t, a, seeddata.BirdyUUID), seedFile(t, "seed-region-a-jobs-after.json", target))

	// Destination profile wins; the missing one was created from the source.
	conflicting, err := b.Profiles().Get(ctx, "conflicting-profile")
	if err != nil {
		t.Fatal(err)
	}
	assertJSONEquals(t, conflicting, seedFile(t, "seed-region-b-conflicting-profile.json", target))
	if _, err := b.Profiles().Get(ctx, "example-profile"); err != nil {
		t.Errorf("example-profile not created on region-b: %v", err)
	}
	if got := seedStoryNames(ctx, t, b); !equal(got, []string{"birdy", "drp2.rackn"}) {
		t.Errorf("region-b machines = %v, want the doc's [birdy drp2.rackn]", got)
	}
	assertActiveOnExactlyOne(ctx, t, s, seeddata.BirdyUUID, "region-b")

	// The ticket was spent: a second import with it is refused and changes nothing.
	if _, err := b.Import(ctx, api.ImportRequest{Ticket: ticket.Token, Bundle: api.Bundle{Machine: api.Machine{Uuid: "5f0e43a9-3d2b-4a55-9a8e-1c6a8f0c0a01", Name: "drp1.rackn"}}}); err == nil {
		t.Error("a replayed ticket imported a second machine")
	}
	if _, err := b.Machines().Get(ctx, "Name:drp1.rackn"); err == nil {
		t.Error("drp1.rackn appeared on region-b")
	}
}

// TestMigrationRefusals: each bad request ends with a clear error and leaves the machine
// active on its source with all its jobs.
func TestMigrationRefusals(t *testing.T) {
	s := startStack(t, dev.StackOptions{Seed: true, RunWorker: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a, b := regionClient(s, "region-a"), regionClient(s, "region-b")

	// A ticket minted by region-a is no good for region-b.
	otherTicket, err := a.MintTicket(ctx, api.TicketRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// A tampered ticket.
	good, err := b.MintTicket(ctx, api.TicketRequest{})
	if err != nil {
		t.Fatal(err)
	}
	forged := good.Token[:len(good.Token)-4] + "AAAA"
	// WorkOrderMode machines may not migrate.
	if _, err := a.Machines().Patch(ctx, "Name:drp1.rackn", json.RawMessage(`{"WorkOrderMode": true}`)); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name    string
		in      workflows.MigrateMachineInput
		machine string
		want    string
	}{
		{"unknown machine", workflows.MigrateMachineInput{Machine: "Name:nosuch"}, "", "nosuch"},
		{"work order mode", workflows.MigrateMachineInput{Machine: "Name:drp1.rackn"}, "Name:drp1.rackn", "WorkOrderMode"},
		{"name taken on the destination", workflows.MigrateMachineInput{Machine: "Name:drp2.rackn"}, "Name:drp2.rackn", "drp2.rackn"},
		{"ticket of another region", workflows.MigrateMachineInput{Machine: "Name:birdy", Ticket: otherTicket.Token}, "Name:birdy", "region"},
		{"forged ticket", workflows.MigrateMachineInput{Machine: "Name:birdy", Ticket: forged}, "Name:birdy", "ticket"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.in.SourceRegion, c.in.TargetRegion = "region-a", "region-b"
			var before []byte
			if c.machine != "" {
				before = mustJSON(t, getMachine(ctx, t, a, c.machine))
			}
			err := migrateErr(ctx, t, s, c.in)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("migration error = %v, want one mentioning %q", err, c.want)
			}
			if c.machine != "" {
				if after := mustJSON(t, getMachine(ctx, t, a, c.machine)); string(after) != string(before) {
					t.Errorf("source machine changed:\nbefore %s\nafter  %s", before, after)
				}
			}
		})
	}
	assertActiveOnExactlyOne(ctx, t, s, seeddata.BirdyUUID, "region-a")
	if jobs := listJobs(ctx, t, a, seeddata.BirdyUUID); len(jobs) != 2 {
		t.Errorf("birdy has %d jobs on region-a after refused migrations, want 2", len(jobs))
	}
}

// migrate runs MigrateMachine to completion and returns its result.
func migrate(ctx context.Context, t *testing.T, s *dev.Stack, in workflows.MigrateMachineInput) workflows.MigrateMachineResult {
	t.Helper()
	run := startMigration(ctx, t, s, in)
	var res workflows.MigrateMachineResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatalf("migration %s failed: %v", run.GetID(), err)
	}
	return res
}

func migrateErr(ctx context.Context, t *testing.T, s *dev.Stack, in workflows.MigrateMachineInput) error {
	t.Helper()
	return startMigration(ctx, t, s, in).Get(ctx, nil)
}

// startMigration starts MigrateMachine with the ID the CLI would use.
func startMigration(ctx context.Context, t *testing.T, s *dev.Stack, in workflows.MigrateMachineInput) client.WorkflowRun {
	t.Helper()
	id := in.Machine
	if m, err := regionClient(s, in.SourceRegion).Machines().Get(ctx, in.Machine); err == nil {
		id = m.Uuid
	}
	if in.Grant == "" {
		in.Grant = grant(ctx, t, s, in.SourceRegion, api.GrantRequest{Kind: api.GrantMachine, Key: id, TargetRegion: in.TargetRegion})
	}
	run, err := s.Client.ExecuteWorkflow(ctx, workflows.MigrateMachineStartOptions(id), workflows.MigrateMachine, in)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// assertActiveOnExactlyOne checks invariant 1: the machine is live on exactly one region and
// the other holds nothing or a locked stub.
func assertActiveOnExactlyOne(ctx context.Context, t *testing.T, s *dev.Stack, machine, where string) {
	t.Helper()
	for name := range s.Regions {
		m, err := regionClient(s, name).Machines().Get(ctx, machine)
		var apiErr *regionclient.APIError
		switch {
		case errors.As(err, &apiErr) && apiErr.StatusCode == 404:
			if name == where {
				t.Errorf("machine %s missing on %s", machine, name)
			}
		case err != nil:
			t.Fatal(err)
		case name == where:
			if !m.Runnable || m.Locked || m.Meta[api.MetaRedirectEndpoint] != "" {
				t.Errorf("machine on %s is not live: Runnable=%v Locked=%v Meta=%v", name, m.Runnable, m.Locked, m.Meta)
			}
		default:
			if m.Runnable || (!m.Locked && m.Available) {
				t.Errorf("machine also live on %s: Runnable=%v Locked=%v Available=%v", name, m.Runnable, m.Locked, m.Available)
			}
		}
	}
}

func getMachine(ctx context.Context, t *testing.T, c *regionclient.Client, key string) api.Machine {
	t.Helper()
	m, err := c.Machines().Get(ctx, key)
	if err != nil {
		t.Fatalf("get machine %s: %v", key, err)
	}
	return m
}

func listJobs(ctx context.Context, t *testing.T, c *regionclient.Client, machine string) []api.Job {
	t.Helper()
	jobs, err := c.Jobs().List(ctx, url.Values{"Machine": {machine}})
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

// seedFile reads an after-state of the doc with the doc's drp2 URL replaced by target.
func seedFile(t *testing.T, name, target string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(strings.ReplaceAll(string(b), "{{TARGET_URL}}", target))
}

func setFields(t *testing.T, doc []byte, fields map[string]any) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	for k, v := range fields {
		m[k] = v
	}
	return mustJSON(t, m)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
