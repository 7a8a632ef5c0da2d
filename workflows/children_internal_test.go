package workflows

import (
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
)

// Every MigrateMachine child (TransferRack's and BulkMigrate's) is cancelled, never
// terminated, when its parent closes: a terminated child stops mid-saga and can leave a
// machine active nowhere.
func TestMigrateMachineChildOptions(t *testing.T) {
	o := migrateMachineChildOptions(MigrateMachineInput{SourceRegion: "east", TargetRegion: "west", Machine: "01d8828f-2f7d-4a1c-a1fa-f668274c7c44"})
	if o.ParentClosePolicy != enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL || !o.WaitForCancellation {
		t.Errorf("ParentClosePolicy %v, WaitForCancellation %v; want REQUEST_CANCEL and true", o.ParentClosePolicy, o.WaitForCancellation)
	}
	if o.WorkflowID != MigrateMachineID("01d8828f-2f7d-4a1c-a1fa-f668274c7c44") || o.TaskQueue != TaskQueue {
		t.Errorf("child ID %q on %q", o.WorkflowID, o.TaskQueue)
	}
	if v, ok := o.TypedSearchAttributes.GetKeyword(TargetRegionKey); !ok || v != "west" {
		t.Errorf("child search attribute TargetRegion %q", v)
	}
}
