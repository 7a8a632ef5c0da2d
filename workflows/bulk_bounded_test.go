package workflows_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/workflows"
)

// maxBulkPayload is the bound every payload of a bulk run stays under whatever the number of
// machines: a sixteenth of Temporal's 2 MiB payload limit.
const maxBulkPayload = 128 << 10

// payloadSizes records the largest encoded size of each kind of payload, as the SDK's data
// converter encodes it.
type payloadSizes struct {
	t       *testing.T
	largest map[string]int
}

func (p *payloadSizes) record(what string, v any) {
	p.t.Helper()
	payload, err := converter.GetDefaultDataConverter().ToPayload(v)
	if err != nil {
		p.t.Fatalf("encode %s: %v", what, err)
	}
	p.largest[what] = max(p.largest[what], payload.Size())
}

func (p *payloadSizes) recordPayloads(what string, size int) {
	p.largest[what] = max(p.largest[what], size)
}

// A bulk run of 60,000 machines of which 5,000 fail (each with a message longer than the
// 500 bytes kept) keeps every payload under maxBulkPayload: the selection's pages, the
// batches' inputs and results, each continue-as-new input, the progress and the result. Every
// machine is attempted exactly once over all the runs, and the result counts them all and
// names the first failures.
func TestBulkMigrateStateStaysBoundedAt60000Machines(t *testing.T) {
	const total, perRun = 60_000, 1_500 // a run takes two pages: 1,000 and 500
	machines := machineUUIDs(total)
	failing := map[string]bool{}
	perMachine := map[string]bool{}
	for i, m := range machines {
		switch {
		case i%12 == 0:
			failing[m] = true
		case i%600 == 7:
			perMachine[m] = true // an agent wait: the batch hands it back, a child moves it
		}
	}
	longError := strings.Repeat("the target region refused the import; ", 20)
	sizes := &payloadSizes{t: t, largest: map[string]int{}}
	attempts := map[string]int{}
	var mu sync.Mutex

	in := workflows.BulkMigrateInput{SourceRegion: "east", TargetRegion: "west", Selector: activities.Selector{Pool: "gold"}, MachinesPerRun: perRun}
	var res workflows.BulkMigrateResult
	runs := 0
	for ; ; runs++ {
		children := &fakeChildren{duration: oneMinute}
		b := newBulkEnv(t, machines, children)
		b.paged = func(in activities.SelectPageInput, page activities.SelectPage) {
			sizes.record("SelectMachinesPage input", in)
			sizes.record("SelectMachinesPage result", page)
		}
		b.batch = func(in activities.BatchInput) activities.BatchResult {
			mu.Lock() // two batches run at once
			defer mu.Unlock()
			sizes.record("MigrateBatch input", in)
			var res activities.BatchResult
			for _, m := range in.Machines {
				switch {
				case failing[m]:
					attempts[m]++
					res.Failed = append(res.Failed, activities.BatchFailure{Machine: m, Error: longError + m, Undone: true})
				case perMachine[m]:
					res.PerMachine = append(res.PerMachine, m)
				default:
					attempts[m]++
					res.Moved = append(res.Moved, m)
				}
			}
			sizes.record("MigrateBatch result", res)
			return res
		}
		var err error
		res, err = b.run(in)
		for _, id := range children.started {
			attempts[strings.TrimPrefix(id, "migrate-machine/")]++
		}
		sizes.record("progress", b.progress())
		var can *workflow.ContinueAsNewError
		if !errors.As(err, &can) {
			if err != nil {
				t.Fatalf("run %d: %v", runs, err)
			}
			break
		}
		sizes.recordPayloads("continue-as-new input", can.Input.Size())
		in = workflows.BulkMigrateInput{}
		if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &in); err != nil {
			t.Fatal(err)
		}
		if runs > total/perRun {
			t.Fatalf("still continuing after %d runs", runs)
		}
	}
	sizes.record("result", res)

	if runs+1 != total/perRun {
		t.Errorf("%d runs, want %d", runs+1, total/perRun)
	}
	for _, m := range machines {
		if attempts[m] != 1 {
			t.Fatalf("machine %s attempted %d times, want once", m, attempts[m])
		}
	}
	if len(attempts) != total {
		t.Errorf("%d machines attempted, want %d", len(attempts), total)
	}
	migratedN, failedN, skippedN := res.Counts()
	if res.Total != total || migratedN != total-len(failing) || failedN != len(failing) || skippedN != 0 {
		t.Errorf("result counts: total %d, %d migrated, %d failed, %d skipped; want %d, %d, %d, 0", res.Total, migratedN, failedN, skippedN, total, total-len(failing), len(failing))
	}
	if len(res.Succeeded) != 0 || len(res.Failed) != 100 || res.Failed[0].Machine != machines[0] || len(res.Failed[0].Error) != 503 {
		t.Errorf("result lists %d succeeded and %d failures (first %+v), want none and the first 100, each message cut to 500 bytes", len(res.Succeeded), len(res.Failed), res.Failed[0])
	}
	for what, size := range sizes.largest {
		t.Logf("largest %s: %d bytes", what, size)
		if size > maxBulkPayload {
			t.Errorf("%s of %d bytes is over %d", what, size, maxBulkPayload)
		}
	}
	for _, what := range []string{"SelectMachinesPage result", "MigrateBatch result", "continue-as-new input", "progress", "result"} {
		if sizes.largest[what] == 0 {
			t.Errorf("no %s measured", what)
		}
	}
}

// A name of the selection that no machine has any more when its page is read counts as a
// failure of its own, named, and takes its place in the run.
func TestBulkMigrateCountsANameGoneAsFailed(t *testing.T) {
	machines := machineUUIDs(2)
	selected := []string{machines[0], "missing:gone", machines[1]}
	in := bulkInput(1)
	in.MachinesPerRun = 2
	var res workflows.BulkMigrateResult
	var started []string
	for run := 0; ; run++ {
		children := &fakeChildren{duration: oneMinute}
		var err error
		res, err = newBulkEnv(t, selected, children).run(in)
		started = append(started, children.started...)
		var can *workflow.ContinueAsNewError
		if !errors.As(err, &can) {
			if err != nil || run != 1 {
				t.Fatalf("run %d ended with %v, want the second to succeed", run, err)
			}
			break
		}
		in = workflows.BulkMigrateInput{}
		if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &in); err != nil {
			t.Fatal(err)
		}
	}
	equal(t, "children started", started, []string{workflows.MigrateMachineID(machines[0]), workflows.MigrateMachineID(machines[1])})
	want := []workflows.MachineFailure{{Machine: "gone", Error: "no machine named gone on region east any more"}}
	if res.Total != 3 || res.Migrated != 2 || res.FailedCount != 1 {
		t.Errorf("result %+v, want 2 of 3 migrated, 1 failed", res)
	}
	equal(t, "failed", res.Failed, want)
}

// A run continuing a run recorded before bulkBoundedChange takes over its list of machines
// left (no selection) and its lists of outcomes as counts, keeping the first failures only;
// the runs after it carry the rest of that list the same way.
func TestBulkMigrateContinuesARunThatListedEveryMachine(t *testing.T) {
	machines := machineUUIDs(3)
	var earlier []workflows.MachineFailure
	for i := range 150 {
		earlier = append(earlier, workflows.MachineFailure{Machine: fmt.Sprintf("f-%03d", i), Error: "refused"})
	}
	in := bulkInput(1)
	in.MachinesPerRun = 2
	in.Continuation = &workflows.BulkContinuation{Remaining: machines, Done: workflows.BulkMigrateResult{Total: 154, Succeeded: []string{"s-0"}, Failed: earlier}}
	children := &fakeChildren{duration: oneMinute}
	b := newBulkEnv(t, nil, children)
	_, err := b.run(in)
	var can *workflow.ContinueAsNewError
	if !errors.As(err, &can) {
		t.Fatalf("got %v, want continue-as-new", err)
	}
	var next workflows.BulkMigrateInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	c := next.Continuation
	if b.selects != 0 || c == nil || !slices.Equal(c.Remaining, machines[2:]) || c.After != "" {
		t.Fatalf("%d selections, continued with %+v; want none and the last machine left", b.selects, c)
	}
	if d := c.Done; d.Total != 154 || d.Migrated != 3 || d.FailedCount != 150 || len(d.Succeeded) != 0 || !slices.Equal(d.Failed, earlier[:100]) {
		t.Errorf("carried %d migrated (%d listed), %d failed (%d listed) of %d; want 3 and 150 counted, the first 100 failures listed", d.Migrated, len(d.Succeeded), d.FailedCount, len(d.Failed), d.Total)
	}
	equal(t, "children started", children.started, []string{workflows.MigrateMachineID(machines[0]), workflows.MigrateMachineID(machines[1])})
}
