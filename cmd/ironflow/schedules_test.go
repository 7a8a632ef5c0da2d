package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/workers"
	"github.com/ironflow/ironflow/workflows"
	"github.com/ironflow/ironflow/workflows/moves"
)

// The bulk migration tests run in a namespace of their own on the shared dev server, with a
// worker running the real BulkMigrate and MigrateMachine workflows over fake activities (the
// shared worker of the default namespace knows MigrateMachine only).
const bulkNamespace = "ironflow-bulk"

var bulkNS struct {
	once sync.Once
	err  error
}

// fakeSelector stands in for activities.Activities.SelectMachines and SelectMachinesPage:
// pools of machine UUIDs.
type fakeSelector struct {
	mu    sync.Mutex
	pools map[string][]string
}

func (s *fakeSelector) SelectMachines(_ context.Context, in activities.SelectInput) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in.Region != "region-a" || in.Selector.Pool == "" {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("unexpected selection %+v", in), activities.ErrTypeInvalidSelector, nil)
	}
	return slices.Sorted(slices.Values(s.pools[in.Selector.Pool])), nil
}

func (s *fakeSelector) SelectMachinesPage(ctx context.Context, in activities.SelectPageInput) (activities.SelectPage, error) {
	pool, err := s.SelectMachines(ctx, in.SelectInput)
	if err != nil {
		return activities.SelectPage{}, err
	}
	from, found := slices.BinarySearch(pool, in.After)
	if found {
		from++
	}
	left := pool[from:]
	page := activities.SelectPage{Machines: left[:min(len(left), in.Limit)], Left: len(left)}
	if len(page.Machines) > 0 {
		page.Last = page.Machines[len(page.Machines)-1]
	}
	return page, nil
}

// bulkSetup is a worker in bulkNamespace, a client of it, and a pool of machines: known
// ones that migrate, and unknown ones that the fake ValidateMigration refuses.
type bulkSetup struct {
	tc      client.Client
	fake    *fakeActivities
	pool    string
	known   []string
	unknown []string
}

func newBulkSetup(t *testing.T, known, unknown int) *bulkSetup {
	temporalEnv(t)
	bulkNS.once.Do(func() { bulkNS.err = registerNamespace(shared.server.Address, bulkNamespace) })
	if bulkNS.err != nil {
		t.Fatal(bulkNS.err)
	}
	return newBulkSetupIn(t, bulkNamespace, nil, known, unknown)
}

// newBulkSetupIn is newBulkSetup in namespace, registered, with its worker's and client's
// payloads encoded by dc (nil: the SDK's default).
func newBulkSetupIn(t *testing.T, namespace string, dc converter.DataConverter, known, unknown int) *bulkSetup {
	t.Setenv("IRONFLOW_TEMPORAL_NAMESPACE", namespace)
	t.Setenv(envEndpoint, newTestRegion(t, "region-a").url) // the source grants the bulk migrations
	tc, err := client.Dial(client.Options{HostPort: shared.server.Address, Namespace: namespace, Logger: quietLogger(), DataConverter: dc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	s := &bulkSetup{tc: tc, pool: "pool-" + uuid.NewString()}
	fake := newFakeActivities()
	s.fake = fake
	for range known {
		id := uuid.NewString()
		fake.addMachine(id, "m-"+id)
		s.known = append(s.known, id)
	}
	for range unknown {
		s.unknown = append(s.unknown, uuid.NewString())
	}
	sel := &fakeSelector{pools: map[string][]string{s.pool: append(slices.Clone(s.known), s.unknown...)}}
	w := worker.New(tc, workflows.TaskQueue, worker.Options{})
	w.RegisterWorkflow(workflows.MigrateMachine)
	w.RegisterWorkflow(workflows.BulkMigrate)
	w.RegisterWorkflow(workflows.MigrateMachineBatch)
	w.RegisterWorkflow(workflows.ListRegions)
	w.RegisterActivity(fake)
	w.RegisterActivity(sel)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return s
}

// registerNamespace adds namespace with the workflows' search attributes, and waits until
// the server serves it.
func registerNamespace(address, namespace string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: address, Logger: quietLogger()})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: namespace, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
	})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("register namespace %s: %w", namespace, err)
	}
	if complaint := testutil.Poll(time.Minute, func() string {
		if err = workers.RegisterSearchAttributes(ctx, c, namespace); err != nil {
			return err.Error()
		}
		return ""
	}); complaint != "" {
		return fmt.Errorf("namespace %s not ready: %w", namespace, err)
	}
	return nil
}

// Bad flags are refused before Temporal is contacted: the address points nowhere.
func TestBulkFlagsRefused(t *testing.T) {
	t.Setenv("IRONFLOW_TEMPORAL_ADDRESS", "127.0.0.1:1")
	selection := []string{"--from", "region-a", "--to", "region-b", "--pool", "gold"}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no selector", []string{"--from", "region-a", "--to", "region-b"}, "missing the machines to migrate: give --pool, --rack or --names"},
		{"same region", []string{"--from", "region-a", "--to", "region-a", "--pool", "gold"}, `invalid bulk migration: source and target region are both "region-a"`},
		{"no target", []string{"--from", "region-a", "--pool", "gold"}, "--from and --to are required"},
		{"names and pool", append(slices.Clone(selection), "--names", "a,b"), "[names pool] were all set"},
		{"rack not a UUID", []string{"--from", "region-a", "--to", "region-b", "--rack", "r1"}, `--rack "r1" is not a rack UUID`},
		{"window 0", append(slices.Clone(selection), "--window", "0"), "--window 0 is not between 1 and 50"},
		{"window 51", append(slices.Clone(selection), "--window", "51"), "--window 51 is not between 1 and 50"},
		{"empty name", []string{"--from", "region-a", "--to", "region-b", "--names", "a,,b"}, "the selector lists an empty machine name"},
	}
	for _, tt := range tests {
		for _, command := range [][]string{
			{"migrations", "bulk", "--name", "n"},
			{"migrations", "schedule", "create", "n", "--cron", "0 2 * * *"},
		} {
			t.Run(command[1]+" "+tt.name, func(t *testing.T) {
				code, out, stderr := ironflow(t, "", append(slices.Clone(command), tt.args...)...)
				if code == 0 || out != "" || !strings.Contains(stderr, tt.want) || strings.Contains(stderr, "connect to Temporal") {
					t.Errorf("exit %d, stdout %q, stderr %q; want a refusal saying %q", code, out, stderr, tt.want)
				}
			})
		}
	}
	for _, args := range [][]string{
		{"migrations", "schedule", "create", "a/b", "--cron", "0 2 * * *", "--from", "region-a", "--to", "region-b", "--pool", "gold"},
		{"migrations", "schedule", "create", "n", "--from", "region-a", "--to", "region-b", "--pool", "gold"},
		{"migrations", "bulk", "--name", "a b", "--from", "region-a", "--to", "region-b", "--pool", "gold"},
		{"migrations", "schedule", "delete", "a/b"},
	} {
		code, _, stderr := ironflow(t, "", args...)
		if code == 0 || strings.Contains(stderr, "connect to Temporal") || !strings.Contains(stderr, "must be non-empty, without spaces or slashes") && !strings.Contains(stderr, "--cron is required") {
			t.Errorf("%q: exit %d, stderr %q", args, code, stderr)
		}
	}
}

// A bulk migration of a pool where one machine cannot migrate: the others migrate, the
// command prints the result, then fails naming how many failed.
func TestBulkCommandMigratesAPool(t *testing.T) {
	s := newBulkSetup(t, 3, 1)
	name := "now-" + uuid.NewString()
	code, out, stderr := ironflow(t, "", "migrations", "bulk", "--name", name, "--from", "region-a", "--to", "region-b", "--pool", s.pool, "--window", "2", "--wait")
	if code == 0 || !strings.Contains(stderr, "1 of 4 machines failed to migrate") || !strings.Contains(stderr, "3/4 migrated, 1 failed, 0 skipped\n") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	res := decode[workflows.BulkMigrateResult](t, out)
	wantFailed := []workflows.MachineFailure{{Machine: s.unknown[0], Error: "machine " + s.unknown[0] + " not found on region region-a"}}
	if res.Total != 4 || res.Migrated != 3 || !slices.Equal(res.Failed, wantFailed) {
		t.Errorf("result %+v, want %v migrated and %+v", res, s.known, wantFailed)
	}
	id := workflows.BulkMigrateID(name)
	code, out, stderr = ironflow(t, "", "migrations", "failures", id)
	if got := decode[[]workflows.MachineFailure](t, out); code != 0 || !slices.Equal(got, wantFailed) {
		t.Errorf("failures: exit %d, %+v (stderr %q), want %+v", code, got, stderr, wantFailed)
	}
	code, out, stderr = ironflow(t, "", "migrations", "show", id, "-o", "table")
	if code != 0 || !strings.Contains(out, "3/4 migrated, 1 failed, 0 skipped") || !strings.Contains(out, s.unknown[0]+"  failed") {
		t.Errorf("show: exit %d, stdout %q, stderr %q; want the counts and the failed machine's row", code, out, stderr)
	}

	code, _, stderr = ironflow(t, "", "migrations", "bulk", "--name", name, "--from", "region-a", "--to", "region-b", "--pool", s.pool)
	if code != 0 {
		t.Errorf("a second bulk migration of the same name once the first ended: exit %d, %s", code, stderr)
	}
}

// migrations list names the bulk run that started each batch and machine migration.
func TestMigrationsListNamesTheParentOfABatch(t *testing.T) {
	s := newBulkSetup(t, 2, 0)
	name := "parent-" + uuid.NewString()
	id := workflows.BulkMigrateID(name)
	if code, _, stderr := ironflow(t, "", "migrations", "bulk", "--name", name, "--from", "region-a", "--to", "region-b", "--pool", s.pool, "--wait"); code != 0 {
		t.Fatalf("bulk: exit %d, %s", code, stderr)
	}
	code, out, stderr := ironflow(t, "", "migrations", "list")
	if code != 0 {
		t.Fatalf("list: exit %d, %s", code, stderr)
	}
	var batch string
	for _, r := range decode[[]struct{ WorkflowID, Parent string }](t, out) {
		if strings.HasPrefix(r.WorkflowID, id+"/batch/") {
			batch = r.WorkflowID
			if r.Parent != id {
				t.Errorf("batch %s lists parent %q, want %s", r.WorkflowID, r.Parent, id)
			}
		}
	}
	if batch == "" {
		t.Fatalf("no batch of %s listed: %s", id, out)
	}
	_, out, _ = ironflow(t, "", "migrations", "list", "-o", "table")
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, batch+" ") && !strings.HasSuffix(strings.TrimSpace(line), "  "+id) {
			t.Errorf("table row of the batch %q does not end with its parent %s", line, id)
		}
	}
}

// A bulk migration whose selection matches no machine fails with --wait, saying so, unless
// --allow-empty; its result then shows as nothing matched.
func TestBulkCommandRefusesAnEmptySelection(t *testing.T) {
	newBulkSetup(t, 0, 0)
	args := []string{"migrations", "bulk", "--from", "region-a", "--to", "region-b", "--pool", "nosuchpool", "--wait"}
	code, _, stderr := ironflow(t, "", args...)
	if code == 0 || !strings.Contains(stderr, "no machine matched the selector pool nosuchpool in region region-a") || strings.Contains(stderr, "0/0 migrated, 0 failed, 0 skipped\n") {
		t.Errorf("exit %d, stderr %q; want a failure saying no machine matched", code, stderr)
	}
	name := "empty-" + uuid.NewString()
	code, _, stderr = ironflow(t, "", append(args, "--allow-empty", "--name", name)...)
	if code != 0 || !strings.Contains(stderr, "nothing matched the selector\n") {
		t.Errorf("--allow-empty: exit %d, stderr %q", code, stderr)
	}
	if code, out, stderr := ironflow(t, "", "migrations", "show", workflows.BulkMigrateID(name), "-o", "table"); code != 0 || !strings.Contains(out, "nothing matched the selector") {
		t.Errorf("show: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}

func TestScheduleLifecycle(t *testing.T) {
	s := newBulkSetup(t, 2, 0)
	name := "nightly-" + uuid.NewString()
	create := []string{"migrations", "schedule", "create", name, "--cron", "0 2 * * *", "--from", "region-a", "--to", "region-b", "--pool", s.pool, "--window", "3"}
	code, out, stderr := ironflow(t, "", create...)
	if code != 0 || !strings.Contains(out, "Created schedule "+name+" (0 2 * * *): bulk migration of pool "+s.pool+" from region-a to region-b") {
		t.Fatalf("create: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	code, _, stderr = ironflow(t, "", create...)
	if code == 0 || !strings.Contains(stderr, "schedule "+name+" already exists") {
		t.Errorf("second create: exit %d, stderr %q", code, stderr)
	}
	bad := "bad-" + uuid.NewString()
	code, _, stderr = ironflow(t, "", "migrations", "schedule", "create", bad, "--cron", "0 25 * * *", "--from", "region-a", "--to", "region-b", "--pool", s.pool)
	if code == 0 || !strings.Contains(stderr, `invalid --cron "0 25 * * *" for schedule `+bad+": Invalid schedule spec: Hour is not in range [0-23]") {
		t.Errorf("create with a bad cron: exit %d, stderr %q", code, stderr)
	}
	var notFound *serviceerror.NotFound
	if _, err := s.tc.ScheduleClient().GetHandle(context.Background(), workflows.BulkMigrateID(bad)).Describe(context.Background()); !errors.As(err, &notFound) {
		t.Errorf("the refused schedule exists: %v", err)
	}

	wantInput := workflows.BulkMigrateInput{SourceRegion: "region-a", TargetRegion: "region-b", Selector: activities.Selector{Pool: s.pool}, Window: 3, WaitForRunningJob: 10 * time.Minute}
	var listed moves.Schedule
	eventually(t, func() string {
		code, out, stderr := ironflow(t, "", "migrations", "schedule", "list")
		if code != 0 {
			return "list: " + stderr
		}
		for _, sc := range decode[[]moves.Schedule](t, out) {
			if sc.Name == bad {
				t.Fatalf("list shows the refused schedule: %s", out)
			}
			if sc.Name == name {
				listed = sc
				return ""
			}
		}
		return "schedule not listed yet: " + out
	})
	if listed.Input.SkipMachineDestroy == nil || !*listed.Input.SkipMachineDestroy {
		t.Errorf("listed input %+v, want SkipMachineDestroy true", listed.Input)
	}
	listed.Input.SkipMachineDestroy = nil
	next := time.Now().UTC().Truncate(24 * time.Hour).Add(2 * time.Hour)
	if !next.After(time.Now()) {
		next = next.Add(24 * time.Hour)
	}
	if listed.Cron != "0 2 * * *" || listed.ScheduleID != workflows.BulkMigrateID(name) || listed.Paused || !listed.NextRun.Equal(next) ||
		!equalInput(listed.Input, wantInput) {
		t.Errorf("listed %+v, want cron 0 2 * * *, next run %s, input %+v", listed, next, wantInput)
	}

	desc, err := s.tc.ScheduleClient().GetHandle(context.Background(), workflows.BulkMigrateID(name)).Describe(context.Background())
	if err != nil || desc.Schedule.Policy == nil || desc.Schedule.Policy.CatchupWindow != moves.ScheduleCatchupWindow {
		t.Errorf("schedule policies %+v (%v), want a catch-up window of %s", desc.Schedule.Policy, err, moves.ScheduleCatchupWindow)
	}

	code, out, stderr = ironflow(t, "", "migrations", "schedule", "trigger", name)
	if code != 0 || !strings.HasPrefix(out, "Triggered schedule "+name) {
		t.Fatalf("trigger: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	var workflowID string
	eventually(t, func() string {
		desc, err := s.tc.ScheduleClient().GetHandle(context.Background(), workflows.BulkMigrateID(name)).Describe(context.Background())
		if err != nil {
			return err.Error()
		}
		if n := len(desc.Info.RecentActions); n == 0 || desc.Info.RecentActions[n-1].StartWorkflowResult == nil {
			return "no action yet"
		}
		workflowID = desc.Info.RecentActions[0].StartWorkflowResult.WorkflowID
		return ""
	})
	if !strings.HasPrefix(workflowID, workflows.BulkMigrateID(name)+"-") {
		t.Errorf("the schedule started workflow %s, want bulk-migrate/%s-<time>", workflowID, name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var res workflows.BulkMigrateResult
	if err := s.tc.GetWorkflow(ctx, workflowID, "").Get(ctx, &res); err != nil {
		t.Fatalf("triggered bulk migration: %v", err)
	}
	if res.Total != 2 || res.Migrated != len(s.known) || len(res.Failed) != 0 {
		t.Errorf("triggered bulk migration result %+v, want %v migrated", res, s.known)
	}

	code, out, stderr = ironflow(t, "", "migrations", "schedule", "delete", name)
	if code != 0 || out != "Deleted schedule "+name+"\n" {
		t.Fatalf("delete: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	for _, verb := range []string{"delete", "trigger"} {
		code, _, stderr = ironflow(t, "", "migrations", "schedule", verb, name)
		if code == 0 || !strings.Contains(stderr, "no schedule "+name) {
			t.Errorf("%s of a deleted schedule: exit %d, stderr %q", verb, code, stderr)
		}
	}
	eventually(t, func() string {
		_, out, _ := ironflow(t, "", "migrations", "schedule", "list")
		if strings.Contains(out, name) {
			return "deleted schedule still listed: " + out
		}
		return ""
	})
}

func equalInput(a, b workflows.BulkMigrateInput) bool {
	return a.SourceRegion == b.SourceRegion && a.TargetRegion == b.TargetRegion && a.Window == b.Window &&
		a.WaitForRunningJob == b.WaitForRunningJob && a.Continuation == nil && b.Continuation == nil &&
		a.Selector.Pool == b.Selector.Pool && a.Selector.Rack == b.Selector.Rack && slices.Equal(a.Selector.Names, b.Selector.Names)
}

// TestScheduleTriggerNeedsTheSourceRole: triggering a schedule takes what creating it took,
// an operator or admin token of its source region; anything less starts nothing.
func TestScheduleTriggerNeedsTheSourceRole(t *testing.T) {
	s := newBulkSetup(t, 1, 0)
	name := "trigger-" + uuid.NewString()
	code, _, stderr := ironflow(t, "", "migrations", "schedule", "create", name, "--cron", "0 2 * * *", "--from", "region-a", "--to", "region-b", "--pool", s.pool)
	if code != 0 {
		t.Fatalf("create: exit %d, stderr %q", code, stderr)
	}
	t.Cleanup(func() { ironflow(t, "", "migrations", "schedule", "delete", name) })
	other := newTestRegion(t, "region-b").url
	for _, c := range []struct {
		endpoint string
		args     []string
		want     string
	}{
		{"", []string{"--token", readonlyToken}, "ro has role readonly on the -E region; acting on a migration takes operator or admin"},
		{other, nil, "-E is region region-b, but " + workflows.BulkMigrateID(name) + " moves from region region-a"},
	} {
		code, _, stderr := ironflow(t, c.endpoint, append(c.args, "migrations", "schedule", "trigger", name)...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("trigger %v on %q: exit %d, stderr %q; want %q", c.args, c.endpoint, code, stderr, c.want)
		}
	}
	desc, err := s.tc.ScheduleClient().GetHandle(context.Background(), workflows.BulkMigrateID(name)).Describe(context.Background())
	if err != nil || len(desc.Info.RecentActions) != 0 || desc.Info.NumActions != 0 {
		t.Errorf("refused triggers started runs: %+v (%v)", desc.Info, err)
	}
}
