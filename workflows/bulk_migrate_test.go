package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/workflows"
)

// fakeChildren stands in for MigrateMachine under its name: each machine takes its own time
// (a durable timer), some fail, and it tracks how many run at once.
type fakeChildren struct {
	duration func(machine string) time.Duration
	fail     map[string]bool
	// migratedTo names machines found already migrated (a stub redirecting to the URL).
	migratedTo map[string]string

	mu         sync.Mutex
	running    int
	maxRunning int
	started    []string // workflow IDs
	canceled   []string // machines whose migration saw the cancellation
	inputs     []workflows.MigrateMachineInput
}

func (c *fakeChildren) startedCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.started)
}

func (c *fakeChildren) migrate(ctx workflow.Context, in workflows.MigrateMachineInput) (workflows.MigrateMachineResult, error) {
	c.mu.Lock()
	c.running++
	c.maxRunning = max(c.maxRunning, c.running)
	c.started = append(c.started, workflow.GetInfo(ctx).WorkflowExecution.ID)
	c.inputs = append(c.inputs, in)
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.running--
		c.mu.Unlock()
	}()
	if err := workflow.Sleep(ctx, c.duration(in.Machine)); err != nil {
		c.mu.Lock()
		c.canceled = append(c.canceled, in.Machine)
		c.mu.Unlock()
		return workflows.MigrateMachineResult{}, err
	}
	if to, ok := c.migratedTo[in.Machine]; ok {
		return workflows.MigrateMachineResult{}, temporal.NewNonRetryableApplicationError("machine "+in.Machine+" is a stub already migrated to "+to, activities.ErrTypeAlreadyMigrated, nil, to)
	}
	if c.fail[in.Machine] {
		return workflows.MigrateMachineResult{}, temporal.NewNonRetryableApplicationError("machine "+in.Machine+" refused by the target", activities.ErrTypeDestinationConflict, nil)
	}
	return workflows.MigrateMachineResult{MachineUuid: in.Machine}, nil
}

// bulkEnv is a test environment running BulkMigrate over fake children; SelectMachinesPage
// answers selected a page at a time (selectedPage).
type bulkEnv struct {
	t        *testing.T
	env      *testsuite.TestWorkflowEnvironment
	children *fakeChildren
	selects  int
	// batch answers MigrateBatch; nil leaves every machine to the per-machine path.
	batch   func(activities.BatchInput) activities.BatchResult
	batches int
	// paged, when not nil, sees each SelectMachinesPage call and its answer.
	paged func(activities.SelectPageInput, activities.SelectPage)
}

func newBulkEnv(t *testing.T, selected []string, children *fakeChildren) *bulkEnv {
	var suite testsuite.WorkflowTestSuite
	b := &bulkEnv{t: t, env: suite.NewTestWorkflowEnvironment(), children: children}
	b.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: workflows.BulkMigrateID("test")})
	b.env.RegisterWorkflow(workflows.BulkMigrate)
	b.env.RegisterWorkflow(workflows.MigrateMachineBatch)
	b.env.RegisterWorkflowWithOptions(children.migrate, workflow.RegisterOptions{Name: "MigrateMachine"})
	b.env.RegisterActivity(&activities.Activities{})
	b.env.OnActivity(a.MigrateBatch, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.BatchInput) (activities.BatchResult, error) {
		b.batches++
		if b.batch == nil {
			return activities.BatchResult{PerMachine: in.Machines}, nil
		}
		return b.batch(in), nil
	})
	b.env.OnActivity(a.SelectMachinesPage, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.SelectPageInput) (activities.SelectPage, error) {
		b.selects++
		if in.Region != "east" || in.Selector.Pool != "gold" {
			return activities.SelectPage{}, fmt.Errorf("unexpected selection %+v", in)
		}
		page, err := selectedPage(selected, in)
		if b.paged != nil {
			b.paged(in, page)
		}
		return page, err
	})
	return b
}

// selectedPage is the page of selected in asks for; its cursor is the index of the next
// machine, so a selection may list a machine twice. An entry "missing:<name>" is a name no
// machine has.
func selectedPage(selected []string, in activities.SelectPageInput) (activities.SelectPage, error) {
	from := 0
	if in.After != "" {
		var err error
		if from, err = strconv.Atoi(in.After); err != nil {
			return activities.SelectPage{}, err
		}
	}
	if in.Limit < 1 || in.Limit > activities.MaxSelectPage {
		return activities.SelectPage{}, fmt.Errorf("page limit %d", in.Limit)
	}
	taken := selected[from:min(len(selected), from+in.Limit)]
	page := activities.SelectPage{Left: len(selected) - from, Last: strconv.Itoa(from + len(taken))}
	for _, m := range taken {
		if name, ok := strings.CutPrefix(m, "missing:"); ok {
			page.NotFound = append(page.NotFound, name)
		} else {
			page.Machines = append(page.Machines, m)
		}
	}
	return page, nil
}

// migrated fails the test unless res counts want machines migrated.
func migrated(t *testing.T, res workflows.BulkMigrateResult, want int) {
	t.Helper()
	if got, _, _ := res.Counts(); got != want {
		t.Errorf("%d machines migrated, want %d (result %+v)", got, want, res)
	}
}

func (b *bulkEnv) run(in workflows.BulkMigrateInput) (workflows.BulkMigrateResult, error) {
	b.t.Helper()
	b.env.ExecuteWorkflow(workflows.BulkMigrate, in)
	if !b.env.IsWorkflowCompleted() {
		b.t.Fatal("workflow did not complete")
	}
	var res workflows.BulkMigrateResult
	if err := b.env.GetWorkflowError(); err != nil {
		return res, err
	}
	if err := b.env.GetWorkflowResult(&res); err != nil {
		b.t.Fatal(err)
	}
	return res, nil
}

func (b *bulkEnv) progress() workflows.BulkProgress {
	b.t.Helper()
	v, err := b.env.QueryWorkflow(workflows.ProgressQuery)
	if err != nil {
		b.t.Fatalf("progress query: %v", err)
	}
	var p workflows.BulkProgress
	if err := v.Get(&p); err != nil {
		b.t.Fatal(err)
	}
	return p
}

func machineUUIDs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
	}
	return out
}

// staggered gives machines different durations, so children end out of start order.
func staggered(machine string) time.Duration {
	return time.Duration(len(machine)+int(machine[len(machine)-1]-'0')%4+1) * time.Minute
}

func bulkInput(window int) workflows.BulkMigrateInput {
	return workflows.BulkMigrateInput{SourceRegion: "east", TargetRegion: "west", Selector: activities.Selector{Pool: "gold"}, Window: window}
}

func TestBulkMigrateSlidingWindow(t *testing.T) {
	tests := []struct {
		window, machines, wantMax int
	}{
		{0, 12, workflows.DefaultBulkWindow},
		{1, 4, 1},
		{3, 12, 3},
		{workflows.MaxBulkWindow, 10, 10},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("window %d, %d machines", tt.window, tt.machines), func(t *testing.T) {
			machines := machineUUIDs(tt.machines)
			children := &fakeChildren{duration: staggered}
			b := newBulkEnv(t, machines, children)
			var during workflows.BulkProgress
			b.env.RegisterDelayedCallback(func() { during = b.progress() }, 90*time.Second)
			res, err := b.run(bulkInput(tt.window))
			if err != nil {
				t.Fatal(err)
			}
			if children.maxRunning != tt.wantMax {
				t.Errorf("at most %d children ran at once, want %d", children.maxRunning, tt.wantMax)
			}
			want := make([]string, len(machines))
			for i, m := range machines {
				want[i] = workflows.MigrateMachineID(m)
			}
			// Children run on their own goroutines in the test environment: the order in
			// which they start to run is not the order the workflow started them in.
			equal(t, "children started", slices.Sorted(slices.Values(children.started)), want)
			migrated(t, res, len(machines))
			if res.Total != tt.machines || len(res.Failed) != 0 {
				t.Errorf("result %+v", res)
			}
			if during.Total != tt.machines || during.Running != tt.wantMax || during.Done != 0 {
				t.Errorf("progress after 90 s %+v, want %d running of %d", during, tt.wantMax, tt.machines)
			}
			if p := b.progress(); p.Done != tt.machines || p.Running != 0 || p.Failed != 0 {
				t.Errorf("final progress %+v", p)
			}
		})
	}
}

func TestBulkMigratePassesOptionsToChildren(t *testing.T) {
	children := &fakeChildren{duration: staggered}
	b := newBulkEnv(t, machineUUIDs(2), children)
	in := bulkInput(2)
	in.SkipMachineDestroy = new(false)
	in.WaitForRunningJob = 10 * time.Minute
	if _, err := b.run(in); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(children.inputs, func(x, y workflows.MigrateMachineInput) int { return strings.Compare(x.Machine, y.Machine) })
	for i, got := range children.inputs {
		want := workflows.MigrateMachineInput{SourceRegion: "east", TargetRegion: "west", Machine: machineUUIDs(2)[i], WaitForRunningJob: 10 * time.Minute}
		if got.SkipMachineDestroy == nil || *got.SkipMachineDestroy {
			t.Errorf("child %d: SkipMachineDestroy %v, want false", i, got.SkipMachineDestroy)
		}
		got.SkipMachineDestroy = nil
		if got != want {
			t.Errorf("child %d input %+v, want %+v", i, got, want)
		}
	}
}

func TestBulkMigrateIsolatesFailures(t *testing.T) {
	machines := machineUUIDs(6)
	children := &fakeChildren{duration: staggered, fail: map[string]bool{machines[1]: true, machines[4]: true}}
	b := newBulkEnv(t, machines, children)
	res, err := b.run(bulkInput(2))
	if err != nil {
		t.Fatalf("a bulk migration with failed machines must succeed, got %v", err)
	}
	migrated(t, res, 4)
	slices.SortFunc(res.Failed, func(x, y workflows.MachineFailure) int { return strings.Compare(x.Machine, y.Machine) })
	want := []workflows.MachineFailure{
		{Machine: machines[1], Error: "machine " + machines[1] + " refused by the target"},
		{Machine: machines[4], Error: "machine " + machines[4] + " refused by the target"},
	}
	equal(t, "failed", res.Failed, want)
	if p := b.progress(); p.Done != 4 || p.Failed != 2 || len(p.FailedMachines) != 2 || p.Total != 6 {
		t.Errorf("progress %+v", p)
	}
}

// A machine already being migrated (a direct migration of it runs) fails to start as a child;
// the bulk migration records it as skipped, not failed, and goes on.
func TestBulkMigrateSkipsMachineAlreadyMigrating(t *testing.T) {
	machines := machineUUIDs(2)
	children := &fakeChildren{duration: staggered}
	b := newBulkEnv(t, []string{machines[0], machines[0], machines[1]}, children)
	res, err := b.run(bulkInput(3))
	if err != nil {
		t.Fatal(err)
	}
	want := []workflows.MachineSkip{{Machine: machines[0], Reason: "skipped (already migrating, workflow ID migrate-machine/" + machines[0] + ")"}}
	equal(t, "skipped", res.Skipped, want)
	equal(t, "failed", res.Failed, nil)
	migrated(t, res, len(machines))
	if p := b.progress(); p.Skipped != 1 || p.Failed != 0 {
		t.Errorf("progress %+v", p)
	}
}

func TestBulkMigrateCancelCancelsRunningChildren(t *testing.T) {
	machines := machineUUIDs(5)
	children := &fakeChildren{duration: func(string) time.Duration { return time.Hour }}
	b := newBulkEnv(t, machines, children)
	b.env.RegisterDelayedCallback(b.env.CancelWorkflow, time.Minute)
	_, err := b.run(bulkInput(2))
	if !temporal.IsCanceledError(err) {
		t.Fatalf("want a cancelled workflow, got %v", err)
	}
	equal(t, "children started", slices.Sorted(slices.Values(children.started)), []string{workflows.MigrateMachineID(machines[0]), workflows.MigrateMachineID(machines[1])})
	equal(t, "children cancelled", slices.Sorted(slices.Values(children.canceled)), machines[:2])
	p := b.progress()
	if p.Running != 0 || p.Done != 0 || p.Failed != 2 || p.FailedMachines[0].Error != "migration canceled" {
		t.Errorf("progress after cancel %+v: the parent must wait for its children", p)
	}
}

func TestBulkMigrateRefusesBadInput(t *testing.T) {
	tests := []struct {
		name   string
		change func(*workflows.BulkMigrateInput)
		want   string
	}{
		{"empty selector", func(in *workflows.BulkMigrateInput) { in.Selector = activities.Selector{} }, "selector is empty"},
		{"names and pool", func(in *workflows.BulkMigrateInput) { in.Selector.Names = []string{"a"} }, "mixes machine names"},
		{"same region", func(in *workflows.BulkMigrateInput) { in.TargetRegion = "east" }, `source and target region are both "east"`},
		{"no target", func(in *workflows.BulkMigrateInput) { in.TargetRegion = "" }, "TargetRegion are required"},
		{"window too large", func(in *workflows.BulkMigrateInput) { in.Window = workflows.MaxBulkWindow + 1 }, "Window 51 is not between 1 and 50"},
		{"negative window", func(in *workflows.BulkMigrateInput) { in.Window = -1 }, "Window -1"},
		{"negative machines per run", func(in *workflows.BulkMigrateInput) { in.MachinesPerRun = -1 }, "MachinesPerRun must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			children := &fakeChildren{duration: staggered}
			b := newBulkEnv(t, machineUUIDs(3), children)
			in := bulkInput(0)
			tt.change(&in)
			_, err := b.run(in)
			var appErr *temporal.ApplicationError
			if !errors.As(err, &appErr) || appErr.Type() != workflows.ErrTypeInvalidInput || !appErr.NonRetryable() || !strings.Contains(appErr.Message(), tt.want) {
				t.Fatalf("got %v, want a non-retryable %s error containing %q", err, workflows.ErrTypeInvalidInput, tt.want)
			}
			if b.selects != 0 || len(children.started) != 0 {
				t.Errorf("refused input still selected %d times and started %v", b.selects, children.started)
			}
		})
	}
}

func TestBulkMigrateSelectingNothingSucceeds(t *testing.T) {
	children := &fakeChildren{duration: staggered}
	b := newBulkEnv(t, []string{}, children)
	res, err := b.run(bulkInput(0))
	if err != nil {
		t.Fatal(err)
	}
	if res.Total != 0 || res.Migrated != 0 || len(res.Failed) != 0 || len(children.started) != 0 || b.selects != 1 {
		t.Errorf("result %+v, children %v, selects %d", res, children.started, b.selects)
	}
}

// With 3 machines per run, 7 machines take three runs: the first two continue as new with
// the selection's cursor and what was done, the last returns the whole result. Each run
// selects its own page.
func TestBulkMigrateContinuesAsNew(t *testing.T) {
	machines := machineUUIDs(7)
	failing := map[string]bool{machines[1]: true}
	in := bulkInput(2)
	in.MachinesPerRun = 3
	var res workflows.BulkMigrateResult
	var started []string
	for run, wantRemaining := range []int{4, 1, 0} {
		children := &fakeChildren{duration: staggered, fail: failing}
		b := newBulkEnv(t, machines, children)
		var err error
		res, err = b.run(in)
		started = append(started, slices.Sorted(slices.Values(children.started))...)
		if b.selects != 1 {
			t.Errorf("run %d selected %d times, want once", run, b.selects)
		}
		if wantRemaining == 0 {
			if err != nil {
				t.Fatalf("last run: %v", err)
			}
			break
		}
		var can *workflow.ContinueAsNewError
		if !errors.As(err, &can) || can.WorkflowType.Name != "BulkMigrate" {
			t.Fatalf("run %d: got %v, want continue-as-new", run, err)
		}
		in = workflows.BulkMigrateInput{}
		if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &in); err != nil {
			t.Fatal(err)
		}
		if c := in.Continuation; c == nil || c.After != strconv.Itoa(len(machines)-wantRemaining) || len(c.Remaining) != 0 || c.Done.Total != 7 {
			t.Fatalf("run %d continued with %+v", run, in.Continuation)
		}
		if in.SourceRegion != "east" || in.Window != 2 || in.Selector.Pool != "gold" || in.MachinesPerRun != 3 {
			t.Errorf("run %d continued with input %+v", run, in)
		}
	}
	want := make([]string, len(machines))
	for i, m := range machines {
		want[i] = workflows.MigrateMachineID(m)
	}
	equal(t, "children started over all runs", started, want)
	if res.Total != 7 || res.Migrated != 6 || res.FailedCount != 1 || len(res.Failed) != 1 || res.Failed[0].Machine != machines[1] {
		t.Errorf("final result %+v", res)
	}
}
