package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/tickets"
	"github.com/ironflow/ironflow/workflows"
	"github.com/ironflow/ironflow/workflows/moves"
)

// Who may start, cancel or schedule a move (region/api/grants.go): the CLI first has the
// source region (-E) issue a grant with the user's token, so a token without the operator or
// admin role there gets the region's 403 and nothing starts; the workflow carries the grant
// and has the source verify it.

// grantFor asks the -E region, which must be source, for a grant of req.
func grantFor(cmd *cobra.Command, source string, req api.GrantRequest) (api.Grant, error) {
	rc := regionClient(cmd)
	g, err := rc.IssueGrant(cmd.Context(), req)
	if err != nil {
		return g, fmt.Errorf("region %s did not authorise the move (it takes an operator or admin token of the source region): %w", source, err)
	}
	if g.Region != source {
		// Best effort: the grant is worthless for this move, so it should not linger.
		_ = rc.RevokeGrant(cmd.Context(), g.ID)
		return g, fmt.Errorf("-E is region %s, not the source region %s: point -E at the source region so it can authorise the move", g.Region, source)
	}
	return g, nil
}

// requireToken refuses to go on without a token the -E region accepts: migrations are
// visible to the region's users only.
func requireToken(cmd *cobra.Command) error {
	if _, err := regionClient(cmd).Whoami(cmd.Context()); err != nil {
		return fmt.Errorf("migrations are shown to users of a region only; give a token the -E region accepts: %w", err)
	}
	return nil
}

// requireSourceOperator refuses unless the caller is an operator or admin of the -E region
// and, when the workflow id names its source region, -E is that region.
func requireSourceOperator(ctx context.Context, cmd *cobra.Command, tc client.Client, id string) (api.Whoami, error) {
	who, err := requireOperator(ctx, cmd)
	if err != nil {
		return who, err
	}
	r, err := moves.Describe(ctx, tc, id)
	if err != nil {
		return who, notFoundAsMigration(id, err)
	}
	return who, requireSourceRegion(ctx, cmd, r)
}

// requireOperator refuses unless the caller is an operator or admin of the -E region. It
// comes before any look at the migration: a token that may not act on migrations is told
// so, whatever the state of the one it named.
func requireOperator(ctx context.Context, cmd *cobra.Command) (api.Whoami, error) {
	who, err := regionClient(cmd).Whoami(ctx)
	if err != nil {
		return who, fmt.Errorf("acting on a migration takes an operator or admin token of its source region (-E): %w", err)
	}
	if !slices.Contains([]string{api.RoleAdmin, api.RoleOperator}, who.Role) {
		return who, fmt.Errorf("%s has role %s on the -E region; acting on a migration takes operator or admin", who.User, who.Role)
	}
	return who, nil
}

// requireSourceRegion refuses unless -E is the source region of run r; a run that records no
// source region passes.
func requireSourceRegion(ctx context.Context, cmd *cobra.Command, r moves.Run) error {
	id, source := r.WorkflowID, r.SourceRegion
	if source == "" {
		return nil
	}
	info, err := regionClient(cmd).Info(ctx)
	if err != nil {
		return fmt.Errorf("-E region: %w", err)
	}
	if info.Name != source {
		return fmt.Errorf("-E is region %s, but %s moves from region %s: act on it with an operator or admin token of %s", info.Name, id, source, source)
	}
	return nil
}

// newMigrateGrantCommand prints a grant for a Temporal CLI start (README).
func newMigrateGrantCommand() *cobra.Command {
	var to string
	var ttl time.Duration
	c := &cobra.Command{
		Use:   "migrateGrant KEY --to REGION",
		Short: "Authorise a move of a machine of the -E region to REGION; prints the grant only",
		Long: "Have the -E region (the source) issue a grant to move machine KEY to REGION, for a start with\n" +
			"the Temporal CLI: pass it as \"Grant\" in the input. Takes an operator or admin token. " + machines.keyHelp(),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if to == "" {
				return fmt.Errorf("--to REGION is required")
			}
			info, err := regionClient(cmd).Info(cmd.Context())
			if err != nil {
				return fmt.Errorf("source region: %w", err)
			}
			g, err := grantFor(cmd, info.Name, api.GrantRequest{Kind: api.GrantMachine, Key: machines.key(args[0]), TargetRegion: to, TTL: ttl})
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), g.Token)
			return err
		},
	}
	c.Flags().StringVar(&to, "to", "", "destination region name")
	c.Flags().DurationVar(&ttl, "ttl", api.DefaultGrantTTL, "how long the grant stays valid")
	return c
}

// bulkGrant has the -E region, which must be the bulk migration's source, grant it for ttl
// (0: the default).
func bulkGrant(cmd *cobra.Command, in workflows.BulkMigrateInput, ttl time.Duration) (string, error) {
	sel := api.GrantSelector{Pool: in.Selector.Pool, Rack: in.Selector.Rack, Names: in.Selector.Names}
	g, err := grantFor(cmd, in.SourceRegion, api.GrantRequest{Kind: api.GrantBulk, Selector: sel, TargetRegion: in.TargetRegion, TTL: ttl})
	return g.Token, err
}

// revokeScheduleGrant revokes the grant of the schedule's bulk migration on the -E region,
// once the schedule is gone; a failure is a warning, the grant still expires.
func revokeScheduleGrant(cmd *cobra.Command, grant string) {
	c, err := tickets.ParseGrant(grant)
	if err == nil {
		err = regionClient(cmd).RevokeGrant(cmd.Context(), c.ID)
	}
	if err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: could not revoke the schedule's grant on the -E region (it expires on its own): %v\n", err)
	}
}
