// Package moves is the Temporal client side of Ironflow's moves: it starts, follows, lists,
// shows, cancels and updates machine migrations, rack transfers and bulk migrations, and
// manages the bulk migration schedules. It owns what a client must agree on with the
// workflows: workflow IDs and start options, search attributes, memos, the progress query.
// It neither prints nor knows the CLI's flags: its callers render what it returns.
package moves

import (
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/region/tickets"
	"github.com/ironflow/ironflow/workflows"
)

// Kind is one kind of move as a client sees it: its workflow and its payload types.
type Kind[In, Prog, Res any] struct {
	// Workflow is the workflow function; its name is the workflow type.
	Workflow func(workflow.Context, In) (Res, error)
	// noun names a run in errors ("migration X failed"); subject in "the X continues".
	noun, subject string
	// undone says what a cancellation of a run has undone.
	undone string
	// latestRun: the progress query goes to the latest run of the workflow ID, which
	// continues as new.
	latestRun bool
	// redact hides what must not be shown of an input (nil: nothing).
	redact func(In) In
	// noProgress: the workflow answers no progress query (while it runs, its one activity is
	// all there is).
	noProgress bool
}

// The kinds of move.
var (
	Migration = Kind[workflows.MigrateMachineInput, workflows.Progress, workflows.MigrateMachineResult]{
		Workflow: workflows.MigrateMachine,
		noun:     "migration", subject: "migration",
		undone: "the steps it had done were undone",
		redact: func(in workflows.MigrateMachineInput) workflows.MigrateMachineInput {
			grant := in.Grant
			in = in.Redacted() // a user's ticket may still be unspent
			in.Grant = RedactGrant(grant)
			return in
		},
	}
	Transfer = Kind[workflows.TransferRackInput, workflows.TransferProgress, workflows.TransferRackResult]{
		Workflow: workflows.TransferRack,
		noun:     "transfer", subject: "rack transfer",
		undone: "the steps it had done before the repoint were undone",
		redact: func(in workflows.TransferRackInput) workflows.TransferRackInput {
			in.Grant = RedactGrant(in.Grant)
			return in
		},
	}
	// Batch moves a batch of a rack transfer's or bulk run's machines: listed as "batch of N"
	// and found by any of its machines (MachineUuids).
	Batch = Kind[workflows.MigrateMachineBatchInput, struct{}, activities.BatchResult]{
		Workflow: workflows.MigrateMachineBatch,
		noun:     "batch", subject: "batch",
		undone:     "the machines it had moved were undone",
		noProgress: true,
		redact: func(in workflows.MigrateMachineBatchInput) workflows.MigrateMachineBatchInput {
			in.Grant = RedactGrant(in.Grant)
			return in
		},
	}
	Bulk = Kind[workflows.BulkMigrateInput, workflows.BulkProgress, workflows.BulkMigrateResult]{
		Workflow: workflows.BulkMigrate,
		noun:     "bulk migration", subject: "bulk migration",
		undone:    "its running migrations undid their steps",
		latestRun: true,
		redact:    redactBulk,
	}
)

// redactBulk is in without its grant's secret, for showing it.
func redactBulk(in workflows.BulkMigrateInput) workflows.BulkMigrateInput {
	in.Grant = RedactGrant(in.Grant)
	return in
}

// RedactGrant shows a grant without its secret, for every output: its ID, who it was issued
// to and when it expires, which is what an operator needs to find and revoke it. The token
// itself authorises moves until it expires, so it is never shown; one that does not parse
// as a grant shows as workflows.RedactedTicket.
func RedactGrant(token string) string {
	if token == "" {
		return ""
	}
	c, err := tickets.ParseGrant(token)
	if err != nil {
		return workflows.RedactedTicket
	}
	return fmt.Sprintf("%s grant %s to %s, expires %s", workflows.RedactedTicket, c.ID, c.GrantedTo, time.Unix(c.Expires, 0).UTC().Format(time.RFC3339))
}

// Type is the workflow type of k's runs, as the worker registers it.
func (k Kind[In, Prog, Res]) Type() string { return typeName(k.Workflow) }

// typeName is the name the Temporal SDK registers a workflow function under: the
// function's own name, without its package.
func typeName(fn any) string {
	name := runtime.FuncForPC(reflect.ValueOf(fn).Pointer()).Name()
	return strings.TrimSuffix(name[strings.LastIndex(name, ".")+1:], "-fm")
}
