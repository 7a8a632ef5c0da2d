package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/workflows"
	"github.com/ironflow/ironflow/workflows/moves"
)

type (
	migrationDetail = moves.Detail[workflows.MigrateMachineInput, workflows.Progress, workflows.MigrateMachineResult]
	bulkDetail      = moves.Detail[workflows.BulkMigrateInput, workflows.BulkProgress, workflows.BulkMigrateResult]
	transferDetail  = moves.Detail[workflows.TransferRackInput, workflows.TransferProgress, workflows.TransferRackResult]
	batchDetail     = moves.Detail[workflows.MigrateMachineBatchInput, struct{}, activities.BatchResult]
)

var migrationColumns = []column[moves.Run]{
	{"WORKFLOW ID", func(m moves.Run) string { return m.WorkflowID }},
	{"STATUS", func(m moves.Run) string { return m.Status }},
	{"PHASE", func(m moves.Run) string { return m.MigrationPhase }},
	{"MACHINE", func(m moves.Run) string { return m.MachineName }},
	{"MACHINE UUID", func(m moves.Run) string { return m.MachineUuid }},
	{"FROM", func(m moves.Run) string { return m.SourceRegion }},
	{"TO", func(m moves.Run) string { return m.TargetRegion }},
	{"START", func(m moves.Run) string { return cellTime(m.StartTime) }},
	{"CLOSE", func(m moves.Run) string { return cellTime(m.CloseTime) }},
	{"PARENT", func(m moves.Run) string { return m.Parent }},
}

var migrationDetailColumns = append(
	mapColumns(migrationColumns, func(d migrationDetail) moves.Run { return d.Run }),
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
		Short: "Machine migrations (Temporal workflows): list, show, cancel, pause, bulk runs and schedules",
		Long: `Machine migrations are Temporal workflows: migrate-machine/<machine uuid> for one machine (started
by ironflow machines migrate), bulk-migrate/<name> for many (migrations bulk, migrations schedule),
transfer-rack/<rack uuid> for a rack (ironflow racks transfer). These commands list, show and
cancel them, pause, resume and resize (window) a running bulk migration or rack transfer, start
bulk migrations, and manage bulk migration schedules.`,
	}
	addTemporalFlags(c)
	c.AddCommand(newMigrationsListCommand(), newMigrationsShowCommand(), newMigrationsFailuresCommand(), newMigrationsCancelCommand(), newMigrationsCompensationCommand())
	c.AddCommand(newBulkMigrationCommands()...)
	c.AddCommand(newMigrationsControlCommands()...)
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
			filter := moves.Filter{Machine: machine, Status: status}
			if _, err := filter.Query(); err != nil {
				return flagError(err)
			}
			if err := requireToken(cmd); err != nil {
				return err
			}
			tc, err := dialTemporal(cmd, cliLogger(cmd))
			if err != nil {
				return err
			}
			defer tc.Close()
			list, err := moves.List(cmd.Context(), tc, filter)
			if err != nil {
				return err
			}
			return render(cmd, list, list, migrationColumns)
		},
	}
	c.Flags().StringVar(&machine, "machine", "", "only the migrations of this machine UUID")
	c.Flags().StringVar(&status, "status", "", "only migrations in this status: "+moves.StatusNames())
	return c
}

// flagError names the flag of a filter value moves refused.
func flagError(err error) error {
	var bad *moves.FilterError
	if errors.As(err, &bad) {
		return errors.New("--" + bad.Error())
	}
	return err
}

// startMigration starts MigrateMachine for in.Machine, a machine UUID (key is how the user
// named it). The workflow ID is per machine, so a second migration of the same machine while
// one runs is refused, naming the running one.
func startMigration(ctx context.Context, tc client.Client, key string, in workflows.MigrateMachineInput) (client.WorkflowRun, error) {
	run, err := moves.StartMigration(ctx, tc, in)
	var running *moves.AlreadyRunningError
	if errors.As(err, &running) {
		return nil, fmt.Errorf("machine %s is already being migrated by %s (run %s); follow it with `ironflow migrations show %s` or stop it with `ironflow migrations cancel %s`",
			key, running.ID, running.RunID, running.ID, running.ID)
	}
	if err != nil {
		return nil, fmt.Errorf("start the migration of machine %s: %w", key, err)
	}
	return run, nil
}

// waitError says how to follow or stop a move whose wait the user interrupted (Ctrl-C): the
// workflow is not affected.
func waitError(err error) error {
	var stopped *moves.StoppedError
	if errors.As(err, &stopped) {
		return fmt.Errorf("%w. Follow it with `ironflow migrations show %s`, cancel it with `ironflow migrations cancel %s`",
			err, stopped.ID, stopped.ID)
	}
	return err
}

// printProgress returns a progress callback for Kind.Wait that writes line(p) to w each
// time it changes, and each error of errs(p) not shown yet on its own line (errs may be nil).
func printProgress[P any](w io.Writer, line func(P) string, errs func(P) []string) func(P) {
	if w == nil {
		return nil
	}
	var zero P
	shownLine, shownErrs := line(zero), 0
	return func(p P) {
		if l := line(p); l != shownLine {
			fmt.Fprintln(w, l)
			shownLine = l
		}
		if errs == nil {
			return
		}
		now := errs(p)
		for _, e := range now[min(shownErrs, len(now)):] {
			fmt.Fprintln(w, "error:", moves.PlainError(e))
		}
		shownErrs = len(now)
	}
}

// migrationProgress prints a migration's phases and errors.
func migrationProgress(w io.Writer) func(workflows.Progress) {
	return printProgress(w, func(p workflows.Progress) string { return p.Phase }, func(p workflows.Progress) []string { return p.Errors })
}
