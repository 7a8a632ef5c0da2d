package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/workflows"
	"github.com/ironflow/ironflow/workflows/moves"
)

// newBulkMigrationCommands are `migrations bulk` and `migrations schedule ...`.
func newBulkMigrationCommands() []*cobra.Command {
	return []*cobra.Command{newMigrationsBulkCommand(), newMigrationsScheduleCommand()}
}

// bulkOptions are the flags that describe a bulk migration, shared by `migrations bulk` and
// `migrations schedule create`.
type bulkOptions struct {
	from, to   string
	pool, rack string
	names      []string
	window     int
	deleteStub bool
	waitForJob time.Duration
}

func (o *bulkOptions) addFlags(c *cobra.Command) {
	f := c.Flags()
	f.StringVar(&o.from, "from", "", "source region name (required)")
	f.StringVar(&o.to, "to", "", "destination region name (required)")
	f.StringVar(&o.pool, "pool", "", "migrate the machines of this pool")
	f.StringVar(&o.rack, "rack", "", "migrate the machines of this rack UUID (with --pool: those of both)")
	f.StringSliceVar(&o.names, "names", nil, "migrate these machines, by name (comma-separated)")
	f.IntVar(&o.window, "window", workflows.DefaultBulkWindow, fmt.Sprintf("how many machines migrate at once (1-%d)", workflows.MaxBulkWindow))
	addDeleteStubFlag(c, &o.deleteStub, "delete each locked stub on the source region once its machine is active on the target (default: keep them)")
	f.DurationVar(&o.waitForJob, "wait-for-running-job", 10*time.Minute, "how long each migration waits for a running job to end before giving up")
	c.MarkFlagsMutuallyExclusive("names", "pool")
	c.MarkFlagsMutuallyExclusive("names", "rack")
}

// input checks the flags and returns the workflow input; every refusal names the flag.
func (o *bulkOptions) input() (workflows.BulkMigrateInput, error) {
	var problems []error
	if o.from == "" || o.to == "" {
		problems = append(problems, errors.New("--from and --to are required"))
	}
	if o.pool == "" && o.rack == "" && len(o.names) == 0 {
		problems = append(problems, errors.New("missing the machines to migrate: give --pool, --rack or --names"))
	}
	if o.rack != "" {
		if _, err := uuid.Parse(o.rack); err != nil {
			problems = append(problems, fmt.Errorf("--rack %q is not a rack UUID", o.rack))
		}
	}
	if o.window < 1 || o.window > workflows.MaxBulkWindow {
		problems = append(problems, fmt.Errorf("--window %d is not between 1 and %d", o.window, workflows.MaxBulkWindow))
	}
	if err := errors.Join(problems...); err != nil {
		return workflows.BulkMigrateInput{}, err
	}
	keepStubs := !o.deleteStub
	in := workflows.BulkMigrateInput{
		SourceRegion:       o.from,
		TargetRegion:       o.to,
		Selector:           activities.Selector{Pool: o.pool, Rack: o.rack, Names: o.names},
		Window:             o.window,
		SkipMachineDestroy: &keepStubs,
		WaitForRunningJob:  o.waitForJob,
	}
	if err := in.Check(); err != nil {
		return in, fmt.Errorf("invalid bulk migration: %w", err)
	}
	return in, nil
}

// checkRegions refuses a --from or --to the workers do not know.
func (o *bulkOptions) checkRegions(ctx context.Context, tc client.Client) error {
	return checkRegions(ctx, tc, regionArg{"--from", o.from}, regionArg{"--to", o.to})
}

func newMigrationsBulkCommand() *cobra.Command {
	var o bulkOptions
	var name string
	var wait, allowEmpty bool
	c := &cobra.Command{
		Use:   "bulk --from REGION --to REGION (--pool POOL | --rack UUID | --names A,B)",
		Short: "Migrate many machines now, a few at a time (workflow bulk-migrate/<name>)",
		Long: `Migrate the machines of a pool, of a rack, or named, from one region to another. Each machine
is a MigrateMachine workflow of its own (see ironflow migrations list); at most --window run at
once, and a machine that fails does not stop the others. Prints the workflow ID and run ID; with
--wait it prints the progress on stderr, then the result, and fails when a machine failed or
when no machine matched the selection (unless --allow-empty).
The regions are checked with the workers before anything starts.`,
		Example: `  ironflow migrations bulk --from region-a --to region-b --pool default --wait
  ironflow migrations bulk --from region-a --to region-b --names birdy,robin --name two-birds
  ironflow migrations bulk --from region-a --to region-b --rack <rack uuid> --window 10
  ironflow migrations show bulk-migrate/two-birds    # progress of a bulk migration`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, err := o.input()
			if err != nil {
				return err
			}
			if name == "" {
				name = uuid.NewString()
			}
			if err := moves.CheckName(name); err != nil {
				return fmt.Errorf("--name: %w", err)
			}
			tc, err := dialTemporal(cmd, cliLogger(cmd))
			if err != nil {
				return err
			}
			defer tc.Close()
			if err := o.checkRegions(cmd.Context(), tc); err != nil {
				return err
			}
			if in.Grant, err = bulkGrant(cmd, in, 0); err != nil {
				return err
			}
			run, err := moves.StartBulk(cmd.Context(), tc, name, in)
			var running *moves.AlreadyRunningError
			if errors.As(err, &running) {
				return fmt.Errorf("bulk migration %s is already running (run %s); pick another --name or cancel it with `ironflow migrations cancel %s`", running.ID, running.RunID, running.ID)
			}
			if err != nil {
				return fmt.Errorf("start bulk migration %s: %w", workflows.BulkMigrateID(name), err)
			}
			if !wait {
				started := startedMigration{WorkflowID: run.GetID(), RunID: run.GetRunID()}
				fmt.Fprintf(cmd.ErrOrStderr(), "Its machines show in: ironflow migrations list. Cancel it with: ironflow migrations cancel %s\n", run.GetID())
				return render(cmd, started, []startedMigration{started}, startedColumns)
			}
			res, err := waitBulk(cmd.Context(), tc, run, cmd.ErrOrStderr())
			if err != nil {
				return waitError(err)
			}
			if err := render(cmd, res, res.rows(), bulkResultColumns); err != nil {
				return err
			}
			if _, failed, _ := res.Counts(); failed > 0 {
				return fmt.Errorf("%d of %d machines failed to migrate%s", failed, res.Total, moreFailures(res.BulkMigrateResult, run.GetID()))
			}
			if res.Total == 0 && !allowEmpty {
				return fmt.Errorf("no machine matched the selector %s in region %s (--allow-empty accepts an empty selection)", in.Selector, in.SourceRegion)
			}
			return nil
		},
	}
	o.addFlags(c)
	c.Flags().StringVar(&name, "name", "", "name of the bulk migration, in its workflow ID (default: a new UUID)")
	c.Flags().BoolVar(&wait, "wait", false, "wait for the bulk migration, printing its progress on stderr")
	c.Flags().BoolVar(&allowEmpty, "allow-empty", false, "with --wait, succeed when no machine matches the selection")
	return c
}

// bulkResult is a BulkMigrateResult with a table form: one row per machine it lists (the
// first failures; every machine migrated, in a result recorded before only counts were kept).
type bulkResult struct{ workflows.BulkMigrateResult }

type bulkRow struct{ machine, status, err string }

func (r bulkResult) rows() []bulkRow {
	rows := make([]bulkRow, 0, len(r.Succeeded)+len(r.Failed))
	for _, m := range r.Succeeded {
		rows = append(rows, bulkRow{m, "migrated", ""})
	}
	return append(rows, failureRows(r.Failed)...)
}

// failureRows are the table rows of failed machines.
func failureRows(failures []workflows.MachineFailure) []bulkRow {
	rows := make([]bulkRow, 0, len(failures))
	for _, f := range failures {
		rows = append(rows, bulkRow{f.Machine, "failed", f.Error})
	}
	return rows
}

var bulkResultColumns = []column[bulkRow]{
	{"MACHINE UUID", func(r bulkRow) string { return r.machine }},
	{"STATUS", func(r bulkRow) string { return r.status }},
	{"ERROR", func(r bulkRow) string { return r.err }},
}

// waitBulk waits for a bulk migration, following it across continue-as-new, and writes its
// progress to progress each time it changes, then its final counts.
func waitBulk(ctx context.Context, tc client.Client, run client.WorkflowRun, progress io.Writer) (bulkResult, error) {
	res, err := moves.Bulk.Wait(ctx, tc, run, printProgress(progress, bulkProgressLine, nil))
	if err != nil {
		return bulkResult{res}, err
	}
	fmt.Fprintln(progress, bulkResultLine(res))
	return bulkResult{res}, nil
}

// bulkResultLine is a finished bulk migration's counts, or that its selection was empty (a
// scheduled run finding nothing to move is normal).
func bulkResultLine(r workflows.BulkMigrateResult) string {
	if r.Total == 0 {
		return "nothing matched the selector"
	}
	migrated, failed, skipped := r.Counts()
	return fmt.Sprintf("%d/%d migrated, %d failed, %d skipped", migrated, r.Total, failed, skipped)
}

// moreFailures tells how to list the failures a bulk run's result does not name, "" when it
// names them all.
func moreFailures(r workflows.BulkMigrateResult, id string) string {
	_, failed, _ := r.Counts()
	if failed <= len(r.Failed) {
		return ""
	}
	return fmt.Sprintf(" (the result names the first %d; `ironflow migrations failures %s` lists all %d)", len(r.Failed), id, failed)
}

// bulkProgressLine is a running bulk migration's counts.
func bulkProgressLine(p workflows.BulkProgress) string {
	return fmt.Sprintf("%d/%d migrated, %d failed, %d skipped, %d running (%s)", p.Done, p.Total, p.Failed, p.Skipped, p.Running, controlsText(p.Paused, p.Window))
}

func newMigrationsScheduleCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "schedule",
		Short: "Bulk migrations on a Temporal Schedule: create, list, trigger, delete",
	}
	c.AddCommand(newScheduleCreateCommand(), newScheduleListCommand(), newScheduleTriggerCommand(), newScheduleDeleteCommand())
	return c
}

func newScheduleCreateCommand() *cobra.Command {
	var o bulkOptions
	var cron string
	c := &cobra.Command{
		Use:   "create NAME --cron SPEC --from REGION --to REGION (--pool POOL | --rack UUID | --names A,B)",
		Short: "Run a bulk migration on a cron schedule",
		Long: `Create the Temporal Schedule bulk-migrate/NAME: at each time of --cron it starts the bulk migration
the flags describe; a pool or rack selection is read a page at a time as the run goes (a machine
joining the pool during the run can be moved too). A run still going at the next
time makes that time be skipped. The regions are checked with the workers first.

--cron has exactly five fields, minute hour day-of-month month day-of-week, in UTC unless
prefixed with CRON_TZ=Zone; or one of @hourly, @daily, @weekly, @monthly, @every DURATION.
(Six fields are refused: some tools read the first as seconds, Temporal reads the last as a year.)`,
		Example: `  ironflow migrations schedule create nightly --cron "0 2 * * *" --from region-a --to region-b --pool default
  ironflow migrations schedule create weekly --cron "CRON_TZ=Europe/Paris 30 3 * * 6" --from region-a --to region-b --names birdy,robin`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := moves.CheckName(name); err != nil {
				return err
			}
			if err := checkCron(cron); err != nil {
				return err
			}
			in, err := o.input()
			if err != nil {
				return err
			}
			tc, err := dialTemporal(cmd, cliLogger(cmd))
			if err != nil {
				return err
			}
			defer tc.Close()
			if err := o.checkRegions(cmd.Context(), tc); err != nil {
				return err
			}
			// A schedule starts runs long after this command: its grant lives as long as
			// grants may, and schedule delete revokes it.
			if in.Grant, err = bulkGrant(cmd, in, api.MaxGrantTTL); err != nil {
				return err
			}
			err = moves.CreateSchedule(cmd.Context(), tc, name, cron, in)
			var invalid *moves.InvalidSpecError
			switch {
			case errors.Is(err, moves.ErrScheduleExists):
				return fmt.Errorf("schedule %s already exists; delete it first (ironflow migrations schedule delete %s)", name, name)
			case errors.As(err, &invalid):
				return fmt.Errorf("invalid --cron %q for schedule %s: %s", cron, name, invalid.Message)
			case err != nil:
				return fmt.Errorf("create schedule %s: %w", name, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Created schedule %s (%s): bulk migration of %s from %s to %s\n", name, cron, in.Selector, in.SourceRegion, in.TargetRegion)
			return nil
		},
	}
	o.addFlags(c)
	c.Flags().StringVar(&cron, "cron", "", `when to run: five cron fields ("0 2 * * *" is 02:00 UTC every day) or @daily, @every 6h, ...`)
	return c
}

// checkCron refuses --cron expressions that are not five fields or a @ shorthand, so the help
// and what is accepted agree.
func checkCron(cron string) error {
	spec := strings.TrimSpace(cron)
	if spec == "" {
		return errors.New("--cron is required, e.g. --cron \"0 2 * * *\" for 02:00 UTC every day")
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		_, spec, _ = strings.Cut(spec, " ")
	}
	spec, _, _ = strings.Cut(spec, "#")
	if strings.HasPrefix(strings.TrimSpace(spec), "@") {
		return nil
	}
	if n := len(strings.Fields(spec)); n != 5 {
		return fmt.Errorf("--cron %q has %d fields; write five: minute hour day-of-month month day-of-week (e.g. \"0 2 * * *\" for 02:00 UTC every day)", cron, n)
	}
	return nil
}

var scheduleColumns = []column[moves.Schedule]{
	{"NAME", func(s moves.Schedule) string { return s.Name }},
	{"CRON", func(s moves.Schedule) string { return s.Cron }},
	{"FROM", func(s moves.Schedule) string { return s.Input.SourceRegion }},
	{"TO", func(s moves.Schedule) string { return s.Input.TargetRegion }},
	{"SELECTOR", func(s moves.Schedule) string { return s.Input.Selector.String() }},
	{"WINDOW", func(s moves.Schedule) string { return cellInt(s.Input.Window) }},
	{"PAUSED", func(s moves.Schedule) string { return cellBool(s.Paused) }},
	{"NEXT RUN", func(s moves.Schedule) string { return cellTime(s.NextRun) }},
	{"LAST RUN", func(s moves.Schedule) string { return cellTime(s.LastRun) }},
}

func newScheduleListCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "list",
		Short: "List the bulk migration schedules",
		Example: `  ironflow migrations schedule list
  ironflow migrations schedule list -o table`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tc, err := dialTemporal(cmd, cliLogger(cmd))
			if err != nil {
				return err
			}
			defer tc.Close()
			list, err := moves.ListSchedules(cmd.Context(), tc, tc.dc)
			if err != nil {
				return err
			}
			return render(cmd, list, list, scheduleColumns)
		},
	}
	return c
}

// scheduleCommand is a command on one existing schedule, NAME.
func scheduleCommand(use, short, example string, do func(cmd *cobra.Command, tc *temporalClient, name string) error, done string) *cobra.Command {
	c := &cobra.Command{
		Use:     use + " NAME",
		Short:   short,
		Example: example,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := moves.CheckName(name); err != nil {
				return err
			}
			tc, err := dialTemporal(cmd, cliLogger(cmd))
			if err != nil {
				return err
			}
			defer tc.Close()
			err = do(cmd, tc, name)
			if errors.Is(err, moves.ErrNoSchedule) {
				return fmt.Errorf("no schedule %s (see ironflow migrations schedule list)", name)
			}
			if err != nil {
				return fmt.Errorf("%s schedule %s: %w", use, name, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), done+"\n", name)
			return nil
		},
	}
	return c
}

func newScheduleDeleteCommand() *cobra.Command {
	var grant string
	c := scheduleCommand("delete", "Delete a bulk migration schedule and revoke its grant; running bulk migrations go on",
		"  ironflow migrations schedule delete nightly",
		func(cmd *cobra.Command, tc *temporalClient, name string) (err error) {
			grant, err = moves.DeleteSchedule(cmd.Context(), tc, tc.dc, name)
			return err
		},
		"Deleted schedule %s")
	run := c.RunE
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if err := run(cmd, args); err != nil {
			return err
		}
		if grant != "" {
			revokeScheduleGrant(cmd, grant)
		}
		return nil
	}
	return c
}

func newScheduleTriggerCommand() *cobra.Command {
	return scheduleCommand("trigger", "Start a schedule's bulk migration now (skipped while one still runs)",
		"  ironflow migrations schedule trigger nightly\n  ironflow migrations show bulk-migrate/nightly    # its progress",
		triggerSchedule,
		"Triggered schedule %s; follow it with: ironflow migrations schedule list")
}

// triggerSchedule starts schedule name's bulk migration now for an operator or admin of its
// source region (-E), the role that created it: whoever triggers a run decides when its
// machines move, as much as whoever created the schedule did.
func triggerSchedule(cmd *cobra.Command, tc *temporalClient, name string) error {
	ctx := cmd.Context()
	if _, err := requireOperator(ctx, cmd); err != nil {
		return err
	}
	in, err := moves.ScheduleInput(ctx, tc, tc.dc, name)
	if err != nil {
		return err
	}
	if err := requireSourceRegion(ctx, cmd, moves.Run{WorkflowID: workflows.BulkMigrateID(name), SourceRegion: in.SourceRegion}); err != nil {
		return err
	}
	return moves.TriggerSchedule(ctx, tc, name)
}
