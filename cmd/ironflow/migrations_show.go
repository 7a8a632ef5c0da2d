package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/workflows"
)

// runIDHelp says what the ID argument of show and cancel may be.
const runIDHelp = `ID is a workflow ID (migrate-machine/<uuid>, bulk-migrate/<name>, transfer-rack/<uuid>),
a machine UUID, or a machine key (Name:birdy or birdy) looked up on the -E region.`

func newMigrationsShowCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show a migration, bulk migration or rack transfer: status, input, progress, result or failure",
		Long:  "Show a machine migration, a bulk migration or a rack transfer.\n" + runIDHelp,
		Example: `  ironflow migrations show migrate-machine/01d8828f-2f7d-4a1c-a1fa-f668274c7c44
  ironflow migrations show 01d8828f-2f7d-4a1c-a1fa-f668274c7c44 -o table
  ironflow -E http://127.0.0.1:5240 migrations show birdy
  ironflow migrations show bulk-migrate/nightly`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireToken(cmd); err != nil {
				return err
			}
			id, tc, err := dialRun(cmd, args[0])
			if err != nil {
				return err
			}
			defer tc.Close()
			desc, err := tc.DescribeWorkflowExecution(cmd.Context(), id, "")
			if err != nil {
				return notFoundAsMigration(id, err)
			}
			ctx, warn := cmd.Context(), cmd.ErrOrStderr()
			switch desc.GetWorkflowExecutionInfo().GetType().GetName() {
			case bulkMigrateType:
				d, err := showRun[workflows.BulkMigrateInput, workflows.BulkProgress, workflows.BulkMigrateResult](ctx, tc, desc, warn)
				if err != nil {
					return err
				}
				return render(cmd, d, []bulkDetail{d}, bulkDetailColumns)
			case transferRackType:
				d, err := showRun[workflows.TransferRackInput, workflows.TransferProgress, workflows.TransferRackResult](ctx, tc, desc, warn)
				if err != nil {
					return err
				}
				return render(cmd, d, []transferDetail{d}, transferDetailColumns)
			case migrateMachineBatchType:
				// A batch has no progress query: while it runs, its one activity is all there is.
				d, err := showRun[workflows.MigrateMachineBatchInput, struct{}, activities.BatchResult](ctx, tc, desc, io.Discard)
				if err != nil {
					return err
				}
				return render(cmd, d, []batchDetail{d}, batchDetailColumns)
			}
			d, err := showRun[workflows.MigrateMachineInput, workflows.Progress, workflows.MigrateMachineResult](ctx, tc, desc, warn)
			if err != nil {
				return err
			}
			if d.Input != nil {
				redacted := d.Input.Redacted() // a user's ticket may still be unspent
				d.Input = &redacted
			}
			return render(cmd, d, []migrationDetail{d}, migrationDetailColumns)
		},
	}
}

// dialRun resolves the ID argument of show, cancel and compensation (runID) and dials Temporal.
func dialRun(cmd *cobra.Command, arg string) (string, client.Client, error) {
	id, err := runID(cmd, arg)
	if err != nil {
		return "", nil, err
	}
	tc, err := dialTemporal(cmd, cliLogger(cmd))
	return id, tc, err
}

// runID turns the ID argument of show and cancel into a workflow ID: workflow IDs (they
// have a slash) as they are, a machine UUID into its migration's ID, and any other machine
// key into the ID of the machine's migration, looking the machine up on the -E region.
func runID(cmd *cobra.Command, arg string) (string, error) {
	if strings.Contains(arg, "/") {
		return arg, nil
	}
	if _, err := uuid.Parse(arg); err == nil {
		return workflows.MigrateMachineID(arg), nil
	}
	endpoint := flagOrEnv(cmd, flagEndpoint, envEndpoint)
	m, err := regionClient(cmd).Machines().Get(cmd.Context(), machines.key(arg))
	if err != nil {
		return "", fmt.Errorf("no migration %q: it is neither a workflow ID nor a machine UUID, and machine %s on %s: %w; "+
			"give the machine UUID or the workflow ID (ironflow migrations list shows both), or point -E at the region that has the machine",
			arg, machines.key(arg), endpoint, err)
	}
	return workflows.MigrateMachineID(m.Uuid), nil
}

// showRun gathers what show prints about the latest run of desc's workflow; a running one
// whose progress cannot be queried (no worker) is still shown, with a warning on warn.
func showRun[In, Prog, Res any](ctx context.Context, tc client.Client, desc *workflowservice.DescribeWorkflowExecutionResponse, warn io.Writer) (runDetail[In, Prog, Res], error) {
	d := runDetail[In, Prog, Res]{migration: migrationOf(desc.GetWorkflowExecutionInfo())}
	id := d.WorkflowID
	in, err := runInput[In](ctx, tc, id, d.RunID)
	if err != nil {
		return d, err
	}
	d.Input = &in
	if desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		p, err := queryAs[Prog](ctx, tc, id, d.RunID)
		if err != nil {
			fmt.Fprintln(warn, "Warning:", err)
		} else {
			d.Progress = &p
		}
		return d, nil
	}
	var res Res
	if err := tc.GetWorkflow(ctx, id, d.RunID).Get(ctx, &res); err != nil {
		d.Failure = failureMessage(err)
	} else {
		d.Result = &res
	}
	return d, nil
}

// runInput reads the input of a run from its first history event.
func runInput[In any](ctx context.Context, tc client.Client, id, runID string) (In, error) {
	var in In
	events := tc.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !events.HasNext() {
		return in, fmt.Errorf("migration %s has no history", id)
	}
	first, err := events.Next()
	if err != nil {
		return in, fmt.Errorf("history of migration %s: %w", id, err)
	}
	started := first.GetWorkflowExecutionStartedEventAttributes()
	if started == nil {
		return in, fmt.Errorf("history of migration %s does not start with its input", id)
	}
	if err := converter.GetDefaultDataConverter().FromPayloads(started.GetInput(), &in); err != nil {
		return in, fmt.Errorf("input of migration %s: %w", id, err)
	}
	return in, nil
}

// runColumns are the columns every kind of run shows, then its own.
func runColumns[In, Prog, Res any](progress func(runDetail[In, Prog, Res]) string) []column[runDetail[In, Prog, Res]] {
	get := func(d runDetail[In, Prog, Res]) migration { return d.migration }
	return []column[runDetail[In, Prog, Res]]{
		{"WORKFLOW ID", func(d runDetail[In, Prog, Res]) string { return get(d).WorkflowID }},
		{"STATUS", func(d runDetail[In, Prog, Res]) string { return get(d).Status }},
		{"FROM", func(d runDetail[In, Prog, Res]) string { return get(d).SourceRegion }},
		{"TO", func(d runDetail[In, Prog, Res]) string { return get(d).TargetRegion }},
		{"PROGRESS", progress},
		{"START", func(d runDetail[In, Prog, Res]) string { return cellTime(get(d).StartTime) }},
		{"CLOSE", func(d runDetail[In, Prog, Res]) string { return cellTime(get(d).CloseTime) }},
		{"FAILURE", func(d runDetail[In, Prog, Res]) string { return d.Failure }},
	}
}

var bulkDetailColumns = runColumns(func(d bulkDetail) string {
	switch {
	case d.Progress != nil:
		p := d.Progress
		return fmt.Sprintf("%d/%d migrated, %d failed, %d running", p.Done, p.Total, p.Failed, p.Running)
	case d.Result != nil:
		r := d.Result
		return fmt.Sprintf("%d/%d migrated, %d failed", len(r.Succeeded), r.Total, len(r.Failed))
	}
	return ""
})

var batchDetailColumns = runColumns(func(d batchDetail) string {
	if r := d.Result; r != nil {
		return fmt.Sprintf("%d migrated, %d failed, %d left to their own migration", len(r.Moved), len(r.Failed), len(r.PerMachine))
	}
	if d.Input != nil {
		return fmt.Sprintf("migrating %d machines", len(d.Input.Machines))
	}
	return ""
})

var transferDetailColumns = runColumns(func(d transferDetail) string {
	switch {
	case d.Progress != nil:
		p := d.Progress
		return fmt.Sprintf("%s (machines %d/%d, %d failed)", p.Phase, p.MachinesDone, p.MachinesTotal, p.MachinesFailed)
	case d.Result != nil:
		r := d.Result
		return fmt.Sprintf("rack %s: %d machines, %d subnets, %d pods, %d leases", r.RackName, r.Machines, r.Copied.Subnets, r.Copied.Pods, r.Copied.Leases)
	}
	return ""
})

func notFoundAsMigration(id string, err error) error {
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return fmt.Errorf("no migration %s (ironflow migrations list shows them): %w", id, err)
	}
	return fmt.Errorf("migration %s: %w", id, err)
}

func newMigrationsCancelCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a running migration, bulk migration or rack transfer; it undoes the steps it has done",
		Long: "Cancel a running migration. The workflow runs its compensations in reverse order; a migration\n" +
			"past activation is not undone. A bulk migration cancels the machine migrations it runs.\n" + runIDHelp,
		Example: `  ironflow migrations cancel migrate-machine/01d8828f-2f7d-4a1c-a1fa-f668274c7c44
  ironflow migrations cancel bulk-migrate/nightly`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, tc, err := dialRun(cmd, args[0])
			if err != nil {
				return err
			}
			defer tc.Close()
			if _, err := requireOperator(cmd.Context(), cmd); err != nil {
				return err
			}
			desc, err := tc.DescribeWorkflowExecution(cmd.Context(), id, "")
			if err != nil {
				return notFoundAsMigration(id, err)
			}
			if info := desc.GetWorkflowExecutionInfo(); info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				return fmt.Errorf("migration %s already finished (%s at %s): there is nothing to cancel; see ironflow migrations show %s",
					id, nameOfStatus(info.GetStatus()), cellTime(info.GetCloseTime().AsTime()), id)
			}
			if err := requireSourceRegion(cmd.Context(), cmd, id, desc); err != nil {
				return err
			}
			if err := tc.CancelWorkflow(cmd.Context(), id, ""); err != nil {
				return notFoundAsMigration(id, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Cancel requested for migration %s; it undoes its steps. Follow it with: ironflow migrations show %s\n", id, id)
			return nil
		},
	}
}

// failureMessage says why a run failed without the SDK's wrapping: the message of the first
// application error (the workflow's own, or the activity's that failed it), else the cause.
func failureMessage(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return plainError(appErr.Message())
	}
	var wfErr *temporal.WorkflowExecutionError
	if errors.As(err, &wfErr) {
		if cause := errors.Unwrap(wfErr); cause != nil {
			return plainError(cause.Error())
		}
	}
	return plainError(err.Error())
}
