package integration

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/dev"
	"github.com/ironflow/ironflow/dev/seeddata"
	"github.com/ironflow/ironflow/internal/payloadcodec"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/workflows"
)

// grant has region (the source of a move) issue a grant to the stack's admin; "" when the
// region refuses, e.g. for a machine it does not have, so the workflow reports the refusal.
func grant(ctx context.Context, t *testing.T, s *dev.Stack, region string, req api.GrantRequest) string {
	t.Helper()
	g, err := regionClient(s, region).IssueGrant(ctx, req)
	if err != nil {
		t.Logf("no grant from %s for %+v: %v", region, req, err)
		return ""
	}
	return g.Token
}

// runCLIAs runs the ironflow CLI against the stack with token and returns its output and
// exit error.
func runCLIAs(t *testing.T, s *dev.Stack, token string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(buildIronflow(t), args...)
	cmd.Env = append(os.Environ(), "IRONFLOW_TOKEN="+token, "IRONFLOW_TEMPORAL_ADDRESS="+s.Temporal.Address, "IRONFLOW_PAYLOAD_KEYS="+s.PayloadKeys)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// TestWhoMayStartAMove: a readonly token cannot move a machine through the CLI, `migrations
// list` needs a token, and a Temporal start without a grant that covers the move, or under
// another workflow ID, is refused and changes nothing; a granted move records who started it
// on both regions.
func TestWhoMayStartAMove(t *testing.T) {
	s := startStack(t, dev.StackOptions{Seed: true, RunWorker: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a, b := regionClient(s, "region-a"), regionClient(s, "region-b")
	aURL := s.Regions["region-a"].URL
	before := mustJSON(t, getMachine(ctx, t, a, "Name:birdy"))
	unchanged := func(what string) {
		t.Helper()
		if after := mustJSON(t, getMachine(ctx, t, a, "Name:birdy")); string(after) != string(before) {
			t.Errorf("%s changed birdy on region-a:\nbefore %s\nafter  %s", what, before, after)
		}
		if _, err := b.Machines().Get(ctx, seeddata.BirdyUUID); err == nil {
			t.Errorf("%s put birdy on region-b", what)
		}
	}

	if _, err := a.Users().Create(ctx, api.User{Name: "viewer", Role: api.RoleReadonly}); err != nil {
		t.Fatal(err)
	}
	ro, err := a.MintToken(ctx, "viewer", api.TokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := runCLIAs(t, s, ro.Token, "-E", aURL, "machines", "migrate", "Name:birdy", "--to", "region-b", "--wait")
	if err == nil || !strings.Contains(out, "403") {
		t.Fatalf("readonly migrate: %v: %s", err, out)
	}
	if _, err := s.Client.DescribeWorkflowExecution(ctx, workflows.MigrateMachineID(seeddata.BirdyUUID), ""); err == nil {
		t.Fatal("the readonly token's migrate started a workflow")
	}
	unchanged("the readonly migrate")
	if out, err := runCLIAs(t, s, "", "-E", aURL, "migrations", "list"); err == nil || !strings.Contains(out, "401") {
		t.Fatalf("migrations list without a token: %v: %s", err, out)
	}

	other := getMachine(ctx, t, a, "Name:drp1.rackn").Uuid
	cases := []struct {
		name, id, grant, want string
	}{
		{"no grant", workflows.MigrateMachineID(seeddata.BirdyUUID), "", activities.ErrGrantRefused},
		{"forged grant", workflows.MigrateMachineID(seeddata.BirdyUUID), "eyJqdGkiOiJ4In0.AAAA", activities.ErrGrantRefused},
		{"grant for another machine", workflows.MigrateMachineID(seeddata.BirdyUUID),
			grant(ctx, t, s, "region-a", api.GrantRequest{Kind: api.GrantMachine, Key: other, TargetRegion: "region-b"}), activities.ErrGrantRefused},
		{"grant for another target", workflows.MigrateMachineID(seeddata.BirdyUUID),
			grant(ctx, t, s, "region-a", api.GrantRequest{Kind: api.GrantMachine, Key: seeddata.BirdyUUID, TargetRegion: "region-c"}), activities.ErrGrantRefused},
		{"grant of the target region", workflows.MigrateMachineID(seeddata.BirdyUUID),
			grant(ctx, t, s, "region-b", api.GrantRequest{Kind: api.GrantBulk, Selector: api.GrantSelector{Pool: "default"}, TargetRegion: "region-a"}), activities.ErrGrantRefused},
		{"own workflow ID", "my-own-id",
			grant(ctx, t, s, "region-a", api.GrantRequest{Kind: api.GrantMachine, Key: seeddata.BirdyUUID, TargetRegion: "region-b"}), activities.ErrNonCanonicalWorkID},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := workflows.MigrateMachineInput{SourceRegion: "region-a", TargetRegion: "region-b", Machine: "Name:birdy", Grant: c.grant}
			opts := workflows.MigrateMachineStartOptions(seeddata.BirdyUUID)
			opts.ID = c.id
			run, err := s.Client.ExecuteWorkflow(ctx, opts, workflows.MigrateMachine, in)
			if err != nil {
				t.Fatal(err)
			}
			err = run.Get(ctx, nil)
			var appErr *temporal.ApplicationError
			if !errors.As(err, &appErr) || appErr.Type() != c.want {
				t.Fatalf("migration error %v, want %s", err, c.want)
			}
			unchanged(c.name)
		})
	}

	// A granted move: who started it is in the result and in both regions' audit logs.
	who, err := a.Whoami(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res := migrate(ctx, t, s, workflows.MigrateMachineInput{SourceRegion: "region-a", TargetRegion: "region-b", Machine: "Name:birdy"})
	if res.StartedBy != who.User {
		t.Errorf("result StartedBy %q, want %q", res.StartedBy, who.User)
	}
	// Started like the Temporal CLI does, with no memo: the workflow sets it from the grant.
	desc, err := s.Client.DescribeWorkflowExecution(ctx, workflows.MigrateMachineID(seeddata.BirdyUUID), "")
	if err != nil {
		t.Fatal(err)
	}
	var memo string
	p := desc.GetWorkflowExecutionInfo().GetMemo().GetFields()[workflows.MemoStartedBy]
	if p == nil || s.DataConverter.FromPayload(p, &memo) != nil || memo != who.User {
		t.Errorf("memo %s = %q, want %q", workflows.MemoStartedBy, memo, who.User)
	}
	if enc := string(p.GetMetadata()[converter.MetadataEncoding]); enc != payloadcodec.EncodingEncrypted {
		t.Errorf("the dev stack's worker stored memo %s as %q, want it encrypted (%s)", workflows.MemoStartedBy, enc, payloadcodec.EncodingEncrypted)
	}
	for _, c := range []struct {
		region string
		action string
	}{{"region-a", "migration-authorized"}, {"region-b", "import"}} {
		events, err := regionClient(s, c.region).Events(ctx, url.Values{"Kind": {api.KindMachines}, "Key": {seeddata.BirdyUUID}})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, e := range events {
			found = found || e.Action == c.action && e.Details["StartedBy"] == who.User && e.Details["Migration"] == workflows.MigrateMachineID(seeddata.BirdyUUID)
		}
		if !found {
			t.Errorf("no %s event with StartedBy %s on %s: %+v", c.action, who.User, c.region, events)
		}
	}
}
