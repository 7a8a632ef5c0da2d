package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/workflows"
	"github.com/ironflow/ironflow/workflows/moves"
)

// transferOptions are the flags of racks transfer.
type transferOptions struct {
	to         string
	wait       bool
	window     int
	waitForJob time.Duration
}

func newRacksTransferCommand() *cobra.Command {
	var o transferOptions
	c := &cobra.Command{
		Use:   "transfer RACK --to REGION [--wait]",
		Short: "Move a rack controller, its network, pods, leases and machines to another region",
		Long: `Move a rack from the -E region to REGION without forcing its deletion anywhere: the rack is
paused, its fabrics, VLANs, subnets, pods and leases are copied, every machine behind it is
migrated (--window at once), the rack is repointed (it keeps serving DHCP, TFTP and HTTP), then
removed from the source and its queued operations are released on REGION.

RACK is a UUID or a name (Name:rack-a or rack-a), resolved on the -E region. REGION is a name of
the worker's regions file (checked with the workers before the transfer starts) and the name of
the target's rack secret in the rack's configuration.
The transfer is the Temporal workflow transfer-rack/<rack uuid>: a second transfer of the same
rack while one runs is refused. Without --wait it prints the workflow ID and run ID; with --wait
it prints each phase and the machine counts on stderr as they change, then the result.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args[0]) },
	}
	addTemporalFlags(c)
	f := c.Flags()
	f.StringVar(&o.to, "to", "", "target region name (required)")
	f.BoolVar(&o.wait, "wait", false, "wait for the transfer, printing its progress on stderr")
	f.IntVar(&o.window, "window", workflows.DefaultBulkWindow, fmt.Sprintf("how many machines migrate at once (1-%d)", workflows.MaxBulkWindow))
	f.DurationVar(&o.waitForJob, "wait-for-running-job", 10*time.Minute, "how long each machine's migration waits for a running job to end")
	return c
}

func (o transferOptions) run(cmd *cobra.Command, key string) error {
	if o.to == "" {
		return errors.New("missing the target region: ironflow racks transfer RACK --to REGION")
	}
	// The cap of bulk migrations and of the set-window Update: a transfer's window must not
	// be unbounded either.
	if o.window < 1 || o.window > workflows.MaxBulkWindow {
		return fmt.Errorf("--window %d is not between 1 and %d", o.window, workflows.MaxBulkWindow)
	}
	if o.waitForJob < 0 {
		return fmt.Errorf("--wait-for-running-job %s is negative", o.waitForJob)
	}
	rc := regionClient(cmd)
	info, err := rc.Info(cmd.Context())
	if err != nil {
		return fmt.Errorf("source region: %w", err)
	}
	if info.Name == o.to {
		return fmt.Errorf("rack %s is on region %s already", key, o.to)
	}
	rack, err := rc.Racks().Get(cmd.Context(), racks.key(key))
	if err != nil {
		return fmt.Errorf("rack %s on region %s: %w", key, info.Name, err)
	}
	in := workflows.TransferRackInput{SourceRegion: info.Name, TargetRegion: o.to, Rack: rack.Uuid, Window: o.window, WaitForRunningJob: o.waitForJob}
	tc, err := dialTemporal(cmd, cliLogger(cmd))
	if err != nil {
		return err
	}
	defer tc.Close()
	if err := checkRegions(cmd.Context(), tc, regionArg{"source: -E", in.SourceRegion}, regionArg{"--to", in.TargetRegion}); err != nil {
		return err
	}
	grant, err := grantFor(cmd, info.Name, api.GrantRequest{Kind: api.GrantRack, Key: rack.Uuid, TargetRegion: o.to})
	if err != nil {
		return err
	}
	in.Grant = grant.Token
	run, err := moves.StartTransfer(cmd.Context(), tc, in)
	var running *moves.AlreadyRunningError
	if errors.As(err, &running) {
		return fmt.Errorf("rack %s is already being transferred by %s (run %s)", rack.Name, running.ID, running.RunID)
	}
	if err != nil {
		return fmt.Errorf("start the transfer of rack %s: %w", rack.Name, err)
	}
	if !o.wait {
		started := startedMigration{WorkflowID: run.GetID(), RunID: run.GetRunID()}
		fmt.Fprintf(cmd.ErrOrStderr(), "Follow it with: temporal workflow query --type %s --workflow-id %s\n", workflows.ProgressQuery, run.GetID())
		return render(cmd, started, []startedMigration{started}, startedColumns)
	}
	res, err := moves.Transfer.Wait(cmd.Context(), tc, run,
		printProgress(cmd.ErrOrStderr(), transferProgressLine, func(p workflows.TransferProgress) []string { return p.Errors }))
	if err != nil {
		return waitError(err)
	}
	return render(cmd, res, []workflows.TransferRackResult{res}, transferColumns)
}

// transferProgressLine is a transfer's phase and machine counts.
// The machines running and its controls (paused, window) are left out once it has ended,
// when they no longer apply.
func transferProgressLine(p workflows.TransferProgress) string {
	line := fmt.Sprintf("%s (machines %d/%d, %d failed, %d skipped", p.Phase, p.MachinesDone, p.MachinesTotal, p.MachinesFailed, p.MachinesSkipped)
	switch p.Phase {
	case workflows.PhaseCompleted, workflows.PhaseFailed, workflows.PhaseCanceled:
		return line + ")"
	}
	return fmt.Sprintf("%s, %d running; %s)", line, p.MachinesRunning, controlsText(p.Paused, p.Window))
}

var transferColumns = []column[workflows.TransferRackResult]{
	{"RACK", func(r workflows.TransferRackResult) string { return r.RackName }},
	{"MACHINES", func(r workflows.TransferRackResult) string { return cellInt(r.Machines) }},
	{"SUBNETS", func(r workflows.TransferRackResult) string { return cellInt(r.Copied.Subnets) }},
	{"PODS", func(r workflows.TransferRackResult) string { return cellInt(r.Copied.Pods) }},
	{"LEASES", func(r workflows.TransferRackResult) string { return cellInt(r.Copied.Leases) }},
	{"RELEASED OPERATIONS", func(r workflows.TransferRackResult) string { return cellInt(r.Released) }},
}
