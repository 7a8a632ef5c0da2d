package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/workflows"
	"github.com/ironflow/ironflow/workflows/moves"
)

func newRacksRecoverCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "recover RACK",
		Short: "Undo or finish what a terminated transfer of a rack left behind",
		Long: `A transfer that was terminated (temporal workflow terminate, or the termination of its
parent) runs none of its own undos: the rack stays paused on its source region and the copy
the transfer imported stays registered on the target. Both regions record which transfer run
holds the rack (Meta transfer, transfer-run, transfer-role, transfer-from, transfer-to of
racks show). recover finds that run's holds on the -E region and on the other region they
name, and undoes them (deletes the copy on the target, ends the pause on the source) while the
rack serves from the source, or finishes the move (hands the rack over on the source, releases
its queued operations on the target) once it serves from the target; if the transfer ended
during its repoint, the rack controller says which, and a rack that cannot be asked is left as
it is. Each region writes a transfer-recovered event.

The next transfer of the rack does the same before it starts; recover is for doing it now.
It runs as the Temporal workflow transfer-rack/<rack uuid>, so it is refused while a transfer
of the rack runs: wait for that transfer, or cancel it (its undos then run), first. It takes
an operator or admin token of the -E region. RACK is a UUID or a name, resolved on -E.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return recoverRack(cmd, args[0]) },
	}
	addTemporalFlags(c)
	return c
}

func recoverRack(cmd *cobra.Command, key string) error {
	ctx := cmd.Context()
	who, err := requireOperator(ctx, cmd)
	if err != nil {
		return err
	}
	rc := regionClient(cmd)
	info, err := rc.Info(ctx)
	if err != nil {
		return fmt.Errorf("-E region: %w", err)
	}
	rack, err := rc.Racks().Get(ctx, racks.key(key))
	if err != nil {
		return fmt.Errorf("rack %s on region %s: %w", key, info.Name, err)
	}
	tc, err := dialTemporal(cmd, cliLogger(cmd))
	if err != nil {
		return err
	}
	defer tc.Close()
	if err := checkRegions(ctx, tc, regionArg{"-E", info.Name}); err != nil {
		return err
	}
	in := workflows.RecoverRackInput{Rack: rack.Uuid, Regions: []string{info.Name}, StartedBy: who.User}
	run, err := startRecovery(ctx, tc, rack.Name, in)
	if err != nil {
		return err
	}
	var res workflows.RecoverRackResult
	if err := run.Get(ctx, &res); err != nil {
		return fmt.Errorf("recovery %s of rack %s failed: %s", run.GetID(), rack.Name, moves.FailureMessage(err))
	}
	if len(res.Recovered) == 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "nothing to recover: no ended transfer of rack %s holds it on %s or on a region its holds name\n", rack.Name, info.Name)
	}
	return render(cmd, res, res.Recovered, recoveredColumns)
}

// startRecovery starts the recovery of rack name; a transfer (or a recovery) of the rack that
// still runs refuses it.
func startRecovery(ctx context.Context, tc client.Client, name string, in workflows.RecoverRackInput) (client.WorkflowRun, error) {
	run, err := moves.StartRecovery(ctx, tc, in)
	var running *moves.AlreadyRunningError
	if errors.As(err, &running) {
		return nil, fmt.Errorf("rack %s: %s is still running (run %s); recover only after it has ended: wait for it, or cancel it so it undoes its own steps", name, running.ID, running.RunID)
	}
	if err != nil {
		return nil, fmt.Errorf("start the recovery of rack %s: %w", name, err)
	}
	return run, nil
}

var recoveredColumns = []column[workflows.RecoveredTransfer]{
	{"TRANSFER", func(r workflows.RecoveredTransfer) string { return r.Transfer }},
	{"RUN", func(r workflows.RecoveredTransfer) string { return r.Run }},
	{"FROM", func(r workflows.RecoveredTransfer) string { return r.From }},
	{"TO", func(r workflows.RecoveredTransfer) string { return r.To }},
	{"OUTCOME", func(r workflows.RecoveredTransfer) string { return r.Outcome }},
	{"ACTIONS", func(r workflows.RecoveredTransfer) string { return cellList(r.Actions) }},
}
