package main

import (
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/workflows"
	"github.com/ironflow/ironflow/workflows/moves"
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
			r, err := moves.Describe(cmd.Context(), tc, id)
			if err != nil {
				return notFoundAsMigration(id, err)
			}
			switch r.Type {
			case moves.Bulk.Type():
				return showRun(cmd, tc, moves.Bulk, r, bulkDetailColumns, showBulkFailures)
			case moves.Transfer.Type():
				return showRun(cmd, tc, moves.Transfer, r, transferDetailColumns, nil)
			case moves.Batch.Type():
				return showRun(cmd, tc, moves.Batch, r, batchDetailColumns, nil)
			}
			return showRun(cmd, tc, moves.Migration, r, migrationDetailColumns, nil)
		},
	}
}

// dialRun resolves the ID argument of show, cancel and compensation (runID) and dials Temporal.
func dialRun(cmd *cobra.Command, arg string) (string, *temporalClient, error) {
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
	endpoint := flagValue(cmd, flagEndpoint)
	m, err := regionClient(cmd).Machines().Get(cmd.Context(), machines.key(arg))
	if err != nil {
		return "", fmt.Errorf("no migration %q: it is neither a workflow ID nor a machine UUID, and machine %s on %s: %w; "+
			"give the machine UUID or the workflow ID (ironflow migrations list shows both), or point -E at the region that has the machine",
			arg, machines.key(arg), endpoint, err)
	}
	return workflows.MigrateMachineID(m.Uuid), nil
}

// showRun renders the detail of r, a run of kind k, then what more (when not nil) adds; a
// running one whose progress cannot be queried (no worker) is still shown, with a warning on
// stderr.
func showRun[In, Prog, Res any](cmd *cobra.Command, tc *temporalClient, k moves.Kind[In, Prog, Res], r moves.Run, cols []column[moves.Detail[In, Prog, Res]], more func(*cobra.Command, moves.Detail[In, Prog, Res]) error) error {
	d, unanswered, err := k.Show(cmd.Context(), tc, tc.dc, r)
	if err != nil {
		return err
	}
	if unanswered != nil {
		fmt.Fprintln(cmd.ErrOrStderr(), "Warning:", unanswered)
	}
	if err := render(cmd, d, []moves.Detail[In, Prog, Res]{d}, cols); err != nil || more == nil {
		return err
	}
	return more(cmd, d)
}

// showBulkFailures follows a bulk run's table with the failures its progress or result
// names (the first ones), and says on stderr how to list them all when it names only some.
func showBulkFailures(cmd *cobra.Command, d bulkDetail) error {
	var failures []workflows.MachineFailure
	var failed int
	switch {
	case d.Progress != nil:
		failures, failed = d.Progress.FailedMachines, d.Progress.Failed
	case d.Result != nil:
		_, failed, _ = d.Result.Counts()
		failures = d.Result.Failed
	}
	if failed > len(failures) {
		fmt.Fprintf(cmd.ErrOrStderr(), "%d machines failed; the first %d are named here, `ironflow migrations failures %s` lists them all\n", failed, len(failures), d.WorkflowID)
	}
	if len(failures) == 0 || outputFormat(cmd.Flags().Lookup(flagOutput).Value.String()) != formatTable {
		return nil
	}
	fmt.Fprintln(cmd.OutOrStdout())
	return writeTable(cmd.OutOrStdout(), failureRows(failures), bulkResultColumns)
}

// runColumns are the columns every kind of run shows, then its own.
func runColumns[In, Prog, Res any](progress func(moves.Detail[In, Prog, Res]) string) []column[moves.Detail[In, Prog, Res]] {
	type detail = moves.Detail[In, Prog, Res]
	return []column[detail]{
		{"WORKFLOW ID", func(d detail) string { return d.WorkflowID }},
		{"STATUS", func(d detail) string { return d.Status }},
		{"FROM", func(d detail) string { return d.SourceRegion }},
		{"TO", func(d detail) string { return d.TargetRegion }},
		{"PROGRESS", progress},
		{"START", func(d detail) string { return cellTime(d.StartTime) }},
		{"CLOSE", func(d detail) string { return cellTime(d.CloseTime) }},
		{"FAILURE", func(d detail) string { return d.Failure }},
	}
}

var bulkDetailColumns = runColumns(func(d bulkDetail) string {
	switch {
	case d.Progress != nil:
		return bulkProgressLine(*d.Progress)
	case d.Result != nil:
		return bulkResultLine(*d.Result)
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
		return transferProgressLine(*d.Progress)
	case d.Result != nil:
		r := d.Result
		return fmt.Sprintf("rack %s: %d machines, %d subnets, %d pods, %d leases", r.RackName, r.Machines, r.Copied.Subnets, r.Copied.Pods, r.Copied.Leases)
	}
	return ""
})

func notFoundAsMigration(id string, err error) error {
	if moves.IsNotFound(err) {
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
			r, err := moves.Describe(cmd.Context(), tc, id)
			if err != nil {
				return notFoundAsMigration(id, err)
			}
			if !r.Running() {
				return fmt.Errorf("migration %s already finished (%s at %s): there is nothing to cancel; see ironflow migrations show %s",
					id, r.Status, cellTime(r.CloseTime), id)
			}
			if err := requireSourceRegion(cmd.Context(), cmd, r); err != nil {
				return err
			}
			if err := moves.Cancel(cmd.Context(), tc, id); err != nil {
				return notFoundAsMigration(id, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Cancel requested for migration %s; it undoes its steps. Follow it with: ironflow migrations show %s\n", id, id)
			return nil
		},
	}
}
