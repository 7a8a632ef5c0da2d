package moves

import (
	"errors"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/ironflow/ironflow/workflows"
)

// TestKindTypesAreTheWorkflowNames: the type names the CLI queries and shows by are the
// names the worker registers the workflow functions under.
func TestKindTypesAreTheWorkflowNames(t *testing.T) {
	for got, want := range map[string]string{
		Migration.Type(): "MigrateMachine",
		Transfer.Type():  "TransferRack",
		Bulk.Type():      "BulkMigrate",
	} {
		if got != want {
			t.Errorf("Type() = %q, want %q", got, want)
		}
	}
}

func TestFilterQuery(t *testing.T) {
	const machine = "01d8828f-2f7d-4a1c-a1fa-f668274c7c44"
	q, err := Filter{Machine: machine, Status: "running"}.Query()
	// A machine moves alone (MigrateMachine) or in a batch that lists it in MachineUuids.
	want := "((WorkflowType = 'MigrateMachine' AND MachineUuid = '" + machine + "') OR (WorkflowType = 'MigrateMachineBatch' AND MachineUuids = '" + machine + "')) AND ExecutionStatus = 'Running'"
	if err != nil || q != want {
		t.Errorf("Query() = %q, %v; want %q", q, err, want)
	}
	if q, err := (Filter{}).Query(); err != nil || q != "WorkflowType IN ('MigrateMachine', 'MigrateMachineBatch')" {
		t.Errorf("empty filter: %q, %v", q, err)
	}
	// Values are checked, never quoted into the query.
	for _, f := range []Filter{{Machine: "' OR '1'='1"}, {Status: "running' OR '1'='1"}, {Status: "Running"}} {
		q, err := f.Query()
		var bad *FilterError
		if !errors.As(err, &bad) || q != "" {
			t.Errorf("%+v: query %q, error %v; want a *FilterError", f, q, err)
		}
	}
	_, err = Filter{Status: "bogus"}.Query()
	if want := `status "bogus" is not a workflow status (want one of running, completed, failed, canceled, terminated, continued-as-new, timed-out)`; err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}

// TestRunOfReadsSearchAttributes: a run shows the keywords the workflows set, its status by
// name and its workflow type; an attribute it lacks or cannot decode is empty.
func TestRunOfReadsSearchAttributes(t *testing.T) {
	payload := func(v any) *commonpb.Payload {
		p, err := converter.GetDefaultDataConverter().ToPayload(v)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	info := &workflowpb.WorkflowExecutionInfo{
		Execution: &commonpb.WorkflowExecution{WorkflowId: "migrate-machine/m", RunId: "r"},
		Type:      &commonpb.WorkflowType{Name: "MigrateMachine"},
		Status:    enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW,
		StartTime: timestamppb.New(start),
		SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{
			workflows.MachineUuidKey.GetName():    payload("m"),
			workflows.SourceRegionKey.GetName():   payload("region-a"),
			workflows.MigrationPhaseKey.GetName(): payload(42), // not a keyword
		}},
	}
	got := runOf(info)
	want := Run{WorkflowID: "migrate-machine/m", RunID: "r", Status: "continued-as-new", StartTime: start,
		MachineUuid: "m", SourceRegion: "region-a", Type: "MigrateMachine"}
	if got != want {
		t.Errorf("runOf = %+v\nwant %+v", got, want)
	}
	if got.Running() {
		t.Error("a continued-as-new run is not running")
	}
}

func TestCheckName(t *testing.T) {
	for _, bad := range []string{"", "a/b", "a b", "tab\there", "line\n"} {
		if err := CheckName(bad); err == nil {
			t.Errorf("CheckName(%q) accepted", bad)
		}
	}
	if err := CheckName("nightly-2"); err != nil {
		t.Error(err)
	}
}

func TestStartedByMemoIgnoresWhatIsNotAGrant(t *testing.T) {
	for _, grant := range []string{"", "not-a-grant"} {
		if m := startedByMemo(grant); m != nil {
			t.Errorf("startedByMemo(%q) = %v", grant, m)
		}
	}
}

func TestPlainErrorDropsTemporalNoise(t *testing.T) {
	raw := `validating: activity error (type: ValidateMigration, scheduledEventID: 7, startedEventID: 8, identity: 4242@host@): region "region-c" is not in this worker's regions file (type: UnknownRegion, retryable: false)`
	if got, want := PlainError(raw), `validating: region "region-c" is not in this worker's regions file`; got != want {
		t.Errorf("PlainError = %q, want %q", got, want)
	}
	child := `machine m: child workflow execution error (type: MigrateMachine, workflowID: migrate-machine/m, runID: r, initiatedEventID: 5, startedEventID: 6): copying: boom`
	if got, want := PlainError(child), "machine m: copying: boom"; got != want {
		t.Errorf("PlainError = %q, want %q", got, want)
	}
	if !strings.Contains(FailureMessage(errors.New("plain")), "plain") {
		t.Error("FailureMessage lost a plain error")
	}
}
