package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/workflows"
)

// Workflow type names (the workflows' function names).
const (
	migrateMachineType = "MigrateMachine"
	bulkMigrateType    = "BulkMigrate"
	transferRackType   = "TransferRack"
	// migrateMachineBatchType moves a batch of a rack transfer's machines: `migrations list`
	// shows it as "batch of N" and finds it by any of its machines.
	migrateMachineBatchType = "MigrateMachineBatch"
)

// progressInterval is how often a waiting CLI asks a running migration for its progress.
const progressInterval = 500 * time.Millisecond

// queryTimeout bounds one progress query: without a live worker a query waits for one.
const queryTimeout = 5 * time.Second

// namedStatus is a workflow status with its CLI name.
type namedStatus struct {
	name   string
	status enumspb.WorkflowExecutionStatus
}

// migrationStatuses are the values of `migrations list --status`, as shown in the STATUS column.
var migrationStatuses = []namedStatus{
	{"running", enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING},
	{"completed", enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED},
	{"failed", enumspb.WORKFLOW_EXECUTION_STATUS_FAILED},
	{"canceled", enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED},
	{"terminated", enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED},
	{"continued-as-new", enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW},
	{"timed-out", enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT},
}

func nameOfStatus(s enumspb.WorkflowExecutionStatus) string {
	for _, st := range migrationStatuses {
		if st.status == s {
			return st.name
		}
	}
	return strings.ToLower(s.String())
}

func statusNames() string {
	names := make([]string, len(migrationStatuses))
	for i, st := range migrationStatuses {
		names[i] = st.name
	}
	return strings.Join(names, ", ")
}

// migration is one MigrateMachine run as `migrations list` shows it.
type migration struct {
	WorkflowID     string    `json:"WorkflowID"`
	RunID          string    `json:"RunID"`
	Status         string    `json:"Status"`
	StartTime      time.Time `json:"StartTime"`
	CloseTime      time.Time `json:"CloseTime,omitzero"`
	MachineUuid    string    `json:"MachineUuid"`
	MachineName    string    `json:"MachineName"`
	SourceRegion   string    `json:"SourceRegion"`
	TargetRegion   string    `json:"TargetRegion"`
	MigrationPhase string    `json:"MigrationPhase"`
}

// runDetail is one run as `migrations show` shows it: a machine migration, a bulk migration
// or a rack transfer, each with its own input, progress and result.
type runDetail[In, Prog, Res any] struct {
	migration
	Input    *In    `json:"Input,omitempty"`
	Progress *Prog  `json:"Progress,omitempty"`
	Result   *Res   `json:"Result,omitempty"`
	Failure  string `json:"Failure,omitempty"`
}

type (
	migrationDetail = runDetail[workflows.MigrateMachineInput, workflows.Progress, workflows.MigrateMachineResult]
	bulkDetail      = runDetail[workflows.BulkMigrateInput, workflows.BulkProgress, workflows.BulkMigrateResult]
	transferDetail  = runDetail[workflows.TransferRackInput, workflows.TransferProgress, workflows.TransferRackResult]
	batchDetail     = runDetail[workflows.MigrateMachineBatchInput, struct{}, activities.BatchResult]
)

var migrationColumns = []column[migration]{
	{"WORKFLOW ID", func(m migration) string { return m.WorkflowID }},
	{"STATUS", func(m migration) string { return m.Status }},
	{"PHASE", func(m migration) string { return m.MigrationPhase }},
	{"MACHINE", func(m migration) string { return m.MachineName }},
	{"MACHINE UUID", func(m migration) string { return m.MachineUuid }},
	{"FROM", func(m migration) string { return m.SourceRegion }},
	{"TO", func(m migration) string { return m.TargetRegion }},
	{"START", func(m migration) string { return cellTime(m.StartTime) }},
	{"CLOSE", func(m migration) string { return cellTime(m.CloseTime) }},
}

var migrationDetailColumns = append(
	mapColumns(migrationColumns, func(d migrationDetail) migration { return d.migration }),
	column[migrationDetail]{"FAILURE", func(d migrationDetail) string { return d.Failure }},
)

// mapColumns reuses the columns of T for a type that contains a T.
func mapColumns[T, U any](cols []column[T], get func(U) T) []column[U] {
	out := make([]column[U], len(cols))
	for i, c := range cols {
		out[i] = column[U]{c.header, func(u U) string { return c.value(get(u)) }}
	}
	return out
}

func newMigrationsCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "migrations",
		Short: "Machine migrations (Temporal workflows): list, show, cancel, bulk runs and schedules",
		Long: `Machine migrations are Temporal workflows: migrate-machine/<machine uuid> for one machine (started
by ironflow machines migrate), bulk-migrate/<name> for many (migrations bulk, migrations schedule),
transfer-rack/<rack uuid> for a rack (ironflow racks transfer). These commands list, show and
cancel them, start bulk migrations, and manage bulk migration schedules.`,
	}
	addTemporalFlags(c)
	c.AddCommand(newMigrationsListCommand(), newMigrationsShowCommand(), newMigrationsCancelCommand(), newMigrationsCompensationCommand())
	c.AddCommand(newBulkMigrationCommands()...)
	return c
}

func newMigrationsListCommand() *cobra.Command {
	var machine, status string
	c := &cobra.Command{
		Use:   "list",
		Short: "List machine migrations, newest first",
		Example: `  ironflow migrations list -o table
  ironflow migrations list --status running
  ironflow migrations list --machine 01d8828f-2f7d-4a1c-a1fa-f668274c7c44`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			query, err := migrationsQuery(machine, status)
			if err != nil {
				return err
			}
			if err := requireToken(cmd); err != nil {
				return err
			}
			tc, err := dialTemporal(cmd, cliLogger(cmd))
			if err != nil {
				return err
			}
			defer tc.Close()
			list, err := listMigrations(cmd.Context(), tc, query)
			if err != nil {
				return err
			}
			return render(cmd, list, list, migrationColumns)
		},
	}
	c.Flags().StringVar(&machine, "machine", "", "only the migrations of this machine UUID")
	c.Flags().StringVar(&status, "status", "", "only migrations in this status: "+statusNames())
	return c
}

// migrationsQuery is the visibility query of `migrations list`. Its values are checked, not
// quoted, so they cannot change the query.
func migrationsQuery(machine, status string) (string, error) {
	// A machine moves alone (MigrateMachine) or in a batch of a rack transfer (MigrateMachineBatch).
	clauses := []string{fmt.Sprintf("WorkflowType IN ('%s', '%s')", migrateMachineType, migrateMachineBatchType)}
	if machine != "" {
		if _, err := uuid.Parse(machine); err != nil {
			return "", fmt.Errorf("--machine %q is not a machine UUID", machine)
		}
		clauses[0] = fmt.Sprintf("((WorkflowType = '%s' AND %s = '%s') OR (WorkflowType = '%s' AND %s = '%s'))",
			migrateMachineType, workflows.MachineUuidKey.GetName(), machine, migrateMachineBatchType, workflows.MachineUuidsKey.GetName(), machine)
	}
	if status != "" {
		i := slices.IndexFunc(migrationStatuses, func(st namedStatus) bool { return st.name == status })
		if i < 0 {
			return "", fmt.Errorf("--status %q is not a workflow status (want one of %s)", status, statusNames())
		}
		clauses = append(clauses, fmt.Sprintf("ExecutionStatus = '%s'", migrationStatuses[i].status))
	}
	return strings.Join(clauses, " AND "), nil
}

func listMigrations(ctx context.Context, tc client.Client, query string) ([]migration, error) {
	list := []migration{}
	var token []byte
	for {
		resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("list migrations: %w", err)
		}
		for _, info := range resp.GetExecutions() {
			list = append(list, migrationOf(info))
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return list, nil
		}
	}
}

// migrationOf reads a workflow's execution info and search attributes.
func migrationOf(info *workflowpb.WorkflowExecutionInfo) migration {
	m := migration{
		WorkflowID: info.GetExecution().GetWorkflowId(),
		RunID:      info.GetExecution().GetRunId(),
		Status:     nameOfStatus(info.GetStatus()),
	}
	if info.GetStartTime() != nil {
		m.StartTime = info.GetStartTime().AsTime()
	}
	if info.GetCloseTime() != nil {
		m.CloseTime = info.GetCloseTime().AsTime()
	}
	attrs := info.GetSearchAttributes().GetIndexedFields()
	for key, field := range map[temporal.SearchAttributeKeyKeyword]*string{
		workflows.MachineUuidKey:    &m.MachineUuid,
		workflows.MachineNameKey:    &m.MachineName,
		workflows.SourceRegionKey:   &m.SourceRegion,
		workflows.TargetRegionKey:   &m.TargetRegion,
		workflows.MigrationPhaseKey: &m.MigrationPhase,
	} {
		*field = keyword(attrs[key.GetName()])
	}
	if info.GetType().GetName() == migrateMachineBatchType {
		var machines []string
		if p := attrs[workflows.MachineUuidsKey.GetName()]; p != nil {
			_ = converter.GetDefaultDataConverter().FromPayload(p, &machines)
		}
		m.MachineName = fmt.Sprintf("batch of %d", len(machines))
	}
	return m
}

// keyword decodes a keyword search attribute; a missing or undecodable one is empty.
func keyword(p *commonpb.Payload) string {
	var s string
	if p != nil {
		_ = converter.GetDefaultDataConverter().FromPayload(p, &s)
	}
	return s
}

// startMigration starts MigrateMachine for the machine with UUID machineUUID (key is how the
// user named it). The workflow ID is per machine, so a second migration of the same machine
// while one runs is refused, naming the running one.
func startMigration(ctx context.Context, tc client.Client, key, machineUUID string, in workflows.MigrateMachineInput) (client.WorkflowRun, error) {
	opts := workflows.MigrateMachineStartOptions(machineUUID)
	opts.Memo = startedByMemo(in.Grant)
	opts.TypedSearchAttributes = temporal.NewSearchAttributes(
		workflows.MachineUuidKey.ValueSet(machineUUID),
		workflows.SourceRegionKey.ValueSet(in.SourceRegion),
		workflows.TargetRegionKey.ValueSet(in.TargetRegion),
	)
	run, err := tc.ExecuteWorkflow(ctx, opts, workflows.MigrateMachine, in)
	var running *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &running) {
		return nil, fmt.Errorf("machine %s is already being migrated by %s (run %s); follow it with `ironflow migrations show %s` or stop it with `ironflow migrations cancel %s`",
			key, opts.ID, running.RunId, opts.ID, opts.ID)
	}
	if err != nil {
		return nil, fmt.Errorf("start the migration of machine %s: %w", key, err)
	}
	return run, nil
}

// waitMigration waits for run to end. With progress set it polls the progress query and
// writes each new phase, and each new error, on its own line.
func waitMigration(ctx context.Context, tc client.Client, run client.WorkflowRun, progress io.Writer) (workflows.MigrateMachineResult, error) {
	var res workflows.MigrateMachineResult
	var shown workflows.Progress
	err := followRun(ctx, run, &res, func() {
		if progress == nil {
			return
		}
		p, err := queryAs[workflows.Progress](ctx, tc, run.GetID(), run.GetRunID())
		if err != nil {
			return // not answered yet (first workflow task pending) or gone: try again later
		}
		if p.Phase != shown.Phase {
			fmt.Fprintln(progress, p.Phase)
		}
		printNewErrors(progress, shown.Errors, p.Errors)
		shown = p
	})
	switch {
	case ctx.Err() != nil:
		return res, stoppedWaiting("migration", run.GetID())
	case temporal.IsCanceledError(err):
		// A compensation that fails turns the cancellation into a failure instead.
		return res, fmt.Errorf("migration %s was canceled; the steps it had done were undone", run.GetID())
	case err != nil:
		return res, fmt.Errorf("migration %s failed: %s", run.GetID(), failureMessage(err))
	}
	return res, nil
}

// stoppedWaiting is the error of a wait the user interrupted (Ctrl-C): the workflow is not
// affected, and the message says how to follow or stop it.
func stoppedWaiting(what, id string) error {
	return fmt.Errorf("stopped waiting; the %s continues in the background. Follow it with `ironflow migrations show %s`, cancel it with `ironflow migrations cancel %s`",
		what, id, id)
}

// followRun waits for run to end with its result in result, calling poll every
// progressInterval and once more at the end (the final phase is usually set just before the
// workflow returns), so callers can print progress as it changes.
func followRun(ctx context.Context, run client.WorkflowRun, result any, poll func()) error {
	done := make(chan error, 1)
	go func() { done <- run.Get(ctx, result) }()
	ticker := time.NewTicker(progressInterval)
	defer ticker.Stop()
	for {
		select {
		case err := <-done:
			poll()
			return err
		case <-ticker.C:
			poll()
		}
	}
}

// printNewErrors writes the errors of now that were not in before, one per line.
func printNewErrors(w io.Writer, before, now []string) {
	for _, e := range now[min(len(before), len(now)):] {
		fmt.Fprintln(w, "error:", plainError(e))
	}
}
