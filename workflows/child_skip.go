package workflows

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/activities"
)

// MachineSkip is a machine a bulk run or a transfer did not migrate because another migration
// of it was running (a direct `machines migrate`, say): neither moved by this run nor failed.
type MachineSkip struct {
	Machine string // UUID
	Reason  string // "skipped (already migrating, workflow ID …)"
}

// skippedChild reports a child migration refused because another migration of its machine
// runs: its start found the machine's workflow ID taken, or its validation found the machine
// quiesced by another migration.
func skippedChild(machine string, err error) (MachineSkip, bool) {
	var appErr *temporal.ApplicationError
	if !temporal.IsWorkflowExecutionAlreadyStartedError(err) && !(errors.As(err, &appErr) && appErr.Type() == activities.ErrTypeAlreadyMigrating) {
		return MachineSkip{}, false
	}
	return MachineSkip{Machine: machine, Reason: fmt.Sprintf("skipped (already migrating, workflow ID %s)", MigrateMachineID(machine))}, true
}
