package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/workflows"
	"github.com/ironflow/ironflow/workflows/moves"
)

// controlFunc sends one operator control to the move id on behalf of by.
type controlFunc func(ctx context.Context, tc client.Client, id, by string) (workflows.ControlState, error)

// newMigrationsControlCommands are `migrations pause ID`, `migrations resume ID` and
// `migrations window ID N`: the operator's controls of a running bulk migration or rack
// transfer (its pause, resume and set-window Updates).
func newMigrationsControlCommands() []*cobra.Command {
	const who = "\nIt takes an operator or admin token of the source region (-E), which audits it.\n" + runIDHelp
	pause := controlCommand("pause ID", "Stop a bulk migration or rack transfer from starting machines; those running finish",
		"While paused, the run starts no new machine migration or batch; the running ones finish. A bulk\n"+
			"migration stays paused across its continue-as-new. resume lets it go on."+who,
		cobra.ExactArgs(1), func(ctx context.Context, tc client.Client, id, by string) (workflows.ControlState, error) {
			return moves.Pause(ctx, tc, id, by)
		})
	resume := controlCommand("resume ID", "Let a paused bulk migration or rack transfer start machines again",
		"The run starts machines again, up to its window at once."+who,
		cobra.ExactArgs(1), func(ctx context.Context, tc client.Client, id, by string) (workflows.ControlState, error) {
			return moves.Resume(ctx, tc, id, by)
		})
	var window int
	setWindow := controlCommand("window ID N", "Change how many machines a bulk migration or rack transfer runs at once",
		fmt.Sprintf("From its next start on, the run keeps at most N machines (1-%d) migrating at once; running ones\n"+
			"are not stopped when N is smaller. On the batched path N is split over at most two batches."+who, workflows.MaxBulkWindow),
		func(_ *cobra.Command, args []string) error {
			if err := cobra.ExactArgs(2)(nil, args); err != nil {
				return err
			}
			n, err := strconv.Atoi(args[1])
			if err != nil {
				return fmt.Errorf("window %q is not a number", args[1])
			}
			window = n
			return workflows.CheckWindow(n)
		},
		func(ctx context.Context, tc client.Client, id, by string) (workflows.ControlState, error) {
			return moves.SetWindow(ctx, tc, id, window, by)
		})
	return []*cobra.Command{pause, resume, setWindow}
}

func controlCommand(use, short, long string, args cobra.PositionalArgs, send controlFunc) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Long: long, Args: args,
		RunE: func(cmd *cobra.Command, args []string) error {
			id, tc, err := dialRun(cmd, args[0])
			if err != nil {
				return err
			}
			defer tc.Close()
			who, err := requireOperator(cmd.Context(), cmd)
			if err != nil {
				return err
			}
			r, err := moves.Describe(cmd.Context(), tc, id)
			if err != nil {
				return notFoundAsMigration(id, err)
			}
			if r.Type != moves.Bulk.Type() && r.Type != moves.Transfer.Type() {
				return fmt.Errorf("%s is a %s: only bulk migrations and rack transfers can be paused, resumed or given a window", id, r.Type)
			}
			if !r.Running() {
				return fmt.Errorf("migration %s already finished (%s at %s)", id, r.Status, cellTime(r.CloseTime))
			}
			if err := requireSourceRegion(cmd.Context(), cmd, r); err != nil {
				return err
			}
			state, err := send(cmd.Context(), tc, id, who.User)
			var refused *moves.RefusedError
			if errors.As(err, &refused) {
				return err
			}
			if err != nil {
				return notFoundAsMigration(id, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", id, controlsText(state.Paused, state.Window))
			return nil
		},
	}
}

// controlsText says whether a run is paused and its window (0: the default).
func controlsText(paused bool, window int) string {
	state, w := "running", "default"
	if paused {
		state = "paused"
	}
	if window > 0 {
		w = strconv.Itoa(window)
	}
	return state + ", window " + w
}
