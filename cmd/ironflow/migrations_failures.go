package main

import (
	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/workflows/moves"
)

// newMigrationsFailuresCommand lists every machine a bulk migration failed to migrate: its
// own result and progress name the first ones only.
func newMigrationsFailuresCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "failures ID",
		Short: "List every machine a bulk migration failed to migrate, and why",
		Long: `List every machine the bulk migration ID (bulk-migrate/<name>, its latest run and the runs it
continued as) failed to migrate, and why, from the batches and migrations it started. Its own
result and progress (ironflow migrations show) count every failure but name the first 100.
Machines still migrating are not listed.`,
		Example: `  ironflow migrations failures bulk-migrate/nightly -o table`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireToken(cmd); err != nil {
				return err
			}
			id, tc, err := dialRun(cmd, args[0])
			if err != nil {
				return err
			}
			defer tc.Close()
			failures, err := moves.BulkFailures(cmd.Context(), tc, id)
			if err != nil {
				return notFoundAsMigration(id, err)
			}
			return render(cmd, failures, failureRows(failures), bulkResultColumns)
		},
	}
}
