package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/workflows"
	"github.com/ironflow/ironflow/workflows/moves"
)

// newMigrationsCompensationCommand is `migrations compensation ID retry|abandon --reason R`:
// the operator's answer to an undo that keeps failing (phase compensation-stuck).
func newMigrationsCompensationCommand() *cobra.Command {
	var reason string
	c := &cobra.Command{
		Use:   "compensation ID retry|abandon --reason TEXT",
		Short: "Retry now, or abandon, the failing undo of a migration (phase compensation-stuck)",
		Long: "A migration undoing its steps retries a failing undo with a growing backoff until it succeeds.\n" +
			"retry runs it again now; abandon stops undoing, and the migration fails naming what was not\n" +
			"undone. It takes an operator or admin token of the source region (-E). The reason and who asked\n" +
			"(the token's user) are recorded in the migration's progress and result.",
		Args:      cobra.ExactArgs(2),
		ValidArgs: []string{workflows.CompensationRetry, workflows.CompensationAbandon},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := (workflows.CompensationRequest{Action: args[1], Reason: reason, By: "-"}).Check(); err != nil {
				return err
			}
			id, tc, err := dialRun(cmd, args[0])
			if err != nil {
				return err
			}
			defer tc.Close()
			who, err := requireSourceOperator(cmd.Context(), cmd, tc, id)
			if err != nil {
				return err
			}
			req := workflows.CompensationRequest{Action: args[1], Reason: reason, By: who.User}
			note, err := moves.Compensate(cmd.Context(), tc, id, req)
			var refused *moves.RefusedError
			if errors.As(err, &refused) {
				return err
			}
			if err != nil {
				return notFoundAsMigration(id, err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), note)
			return nil
		},
	}
	c.Flags().StringVar(&reason, "reason", "", "why (required; recorded with the request)")
	return c
}
