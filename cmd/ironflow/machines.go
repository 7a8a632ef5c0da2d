package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
	"github.com/ironflow/ironflow/region/tickets"
	"github.com/ironflow/ironflow/workflows"
	"github.com/ironflow/ironflow/workflows/moves"
)

var machines = noun[api.Machine]{
	kind:      api.KindMachines,
	one:       "machine",
	resource:  (*client.Client).Machines,
	deleteFor: (*client.Client).DeleteForMigration,
	columns: []column[api.Machine]{
		{"UUID", func(m api.Machine) string { return m.Uuid }},
		{"NAME", func(m api.Machine) string { return m.Name }},
		{"ADDRESS", func(m api.Machine) string { return m.Address }},
		{"WORKFLOW", func(m api.Machine) string { return m.Workflow }},
		{"STAGE", func(m api.Machine) string { return m.Stage }},
		{"RUNNABLE", func(m api.Machine) string { return cellBool(m.Runnable) }},
		{"LOCKED", func(m api.Machine) string { return cellBool(m.Locked) }},
		{"POOL", func(m api.Machine) string { return m.Pool }},
		{"RACK", func(m api.Machine) string { return m.Rack }},
		{"STATUS", func(m api.Machine) string { return m.Status }},
		{"POWER", machinePowerCell},
	},
}

func newMachinesCommand() *cobra.Command {
	crud := machines.crud()
	for i, c := range crud {
		if c.Name() == "delete" {
			crud[i] = withPodVMDelete(c)
		}
	}
	return machines.command(append(crud, newMigrateTicketCommand(), newMigrateCommand(), newMigrateGrantCommand(), newMachineLogsCommand(), newMachinesInventoryCommand(), newMachinesPowerCommand(), newMachinesSetPowerCommand(),
		newMachinesAddCommand(), newMachinesCommissionCommand())...)
}

func newMigrateTicketCommand() *cobra.Command {
	var ttl time.Duration
	c := &cobra.Command{
		Use:   "migrateTicket",
		Short: "Mint a single-use ticket to migrate a machine into the -E region; prints the ticket only",
		Long: "Mint a single-use ticket to migrate a machine into the -E region. Only the ticket is printed,\n" +
			"so that it can be given to migrate directly:\n\n" +
			"  ironflow machines migrate Name:birdy to \"$(ironflow -E https://region-b:5240 machines migrateTicket)\"",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ttl <= 0 || ttl > tickets.MaxTTL {
				return fmt.Errorf("--ttl %s is outside (0, %s]", ttl, tickets.MaxTTL)
			}
			t, err := regionClient(cmd).MintTicket(cmd.Context(), api.TicketRequest{TTL: ttl})
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), t.Token)
			return err
		},
	}
	c.Flags().DurationVar(&ttl, "ttl", tickets.DefaultTTL, "how long the ticket stays valid")
	return c
}

// migrateOptions are the flags of machines migrate.
type migrateOptions struct {
	to, from      string
	wait          bool
	skipMigration bool
	deleteStub    bool
	waitForJob    time.Duration
}

// temporalStartExample is the same start as `machines migrate` with the official Temporal CLI.
var temporalStartExample = fmt.Sprintf(
	`temporal workflow start --task-queue %s --type %s --workflow-id %s --id-conflict-policy Fail --input '{"SourceRegion":"region-a","TargetRegion":"region-b","Machine":"Name:birdy","Grant":"'"$(ironflow -E https://region-a:5240 machines migrateGrant Name:birdy --to region-b)"'"}'`,
	workflows.TaskQueue, moves.Migration.Type(), workflows.MigrateMachineID("<uuid>"))

func newMigrateCommand() *cobra.Command {
	var o migrateOptions
	c := &cobra.Command{
		Use:   "migrate KEY (to TICKET | --to REGION)",
		Short: "Migrate a machine, its jobs and profiles to another region",
		Long: `Migrate a machine, its jobs and profiles from the -E region (or --from REGION) to another region.

  ironflow machines migrate KEY to TICKET
      As drpcli: TICKET is minted by the destination (machines migrateTicket). Waits for the
      migration and prints "Machine KEY migrated to URL".
      ironflow machines migrate Name:birdy to "$(ironflow -E https://region-b:5240 machines migrateTicket)"

  ironflow machines migrate KEY --to REGION [--wait]
      The migration mints its ticket itself. Prints the workflow ID and run ID; with --wait it
      prints each phase on stderr as it passes, then the result.

KEY is a UUID, Field:value (Name:birdy) or a name (birdy), resolved on the -E region. Region
names are those of the worker's regions file; --to and the source are checked with the workers
before the migration starts. The migration is the Temporal workflow migrate-machine/<machine uuid>:
a second migration of a machine while one runs is refused. The same start with the Temporal CLI:

  ` + temporalStartExample + `

In the JSON input, durations (WaitForRunningJob, AgentCheckInTimeout) are Go durations ("10m")
or integer nanoseconds, and a field the workflow does not know fails the run, naming it.`,
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args) },
	}
	addTemporalFlags(c)
	f := c.Flags()
	f.StringVar(&o.to, "to", "", "destination region name (instead of: to TICKET)")
	f.StringVar(&o.from, "from", "", "source region name (default: the name of the -E region)")
	f.BoolVar(&o.wait, "wait", false, "wait for the migration, printing its phases on stderr")
	f.BoolVar(&o.skipMigration, "skip-machine-migration", false, "only repoint the agent: the machine record already moved")
	addDeleteStubFlag(c, &o.deleteStub, "delete the locked stub on the source region once the machine is active on the target (default: keep it)")
	f.DurationVar(&o.waitForJob, "wait-for-running-job", 10*time.Minute, "how long to wait for a running job to end before giving up")
	return c
}

func (o migrateOptions) run(cmd *cobra.Command, args []string) error {
	key, ticket, err := migrateArgs(args, o.to)
	if err != nil {
		return err
	}
	if o.waitForJob < 0 {
		return fmt.Errorf("--wait-for-running-job %s is negative", o.waitForJob)
	}
	keepStub := !o.deleteStub
	in := workflows.MigrateMachineInput{
		TargetRegion:         o.to,
		Ticket:               ticket,
		SkipMachineMigration: o.skipMigration,
		SkipMachineDestroy:   &keepStub,
		WaitForRunningJob:    o.waitForJob,
	}
	var claims tickets.Claims
	if ticket != "" {
		if claims, err = tickets.Parse(ticket); err != nil {
			return fmt.Errorf("ticket: %w", err)
		}
		// Only the destination can verify the signature, but anyone can read the expiry.
		if exp := time.Unix(claims.Expires, 0); !time.Now().Before(exp) {
			return fmt.Errorf("ticket: %w at %s; mint a new one", tickets.ErrExpired, exp.UTC().Format(time.RFC3339))
		}
		in.TargetRegion = claims.Region
	}
	if in.Machine, in.SourceRegion, err = o.resolveSource(cmd, key, in.TargetRegion); err != nil {
		return err
	}
	if in.SourceRegion == in.TargetRegion {
		return fmt.Errorf("machine %s is already on region %s", key, in.TargetRegion)
	}
	tc, err := dialTemporal(cmd, cliLogger(cmd))
	if err != nil {
		return err
	}
	defer tc.Close()
	// A ticket names its region by URL, which the worker resolves itself.
	if ticket == "" {
		if err := checkRegions(cmd.Context(), tc, regionArg{"source: -E or --from", in.SourceRegion}, regionArg{"--to", in.TargetRegion}); err != nil {
			return err
		}
	}
	grant, err := grantFor(cmd, in.SourceRegion, api.GrantRequest{Kind: api.GrantMachine, Key: in.Machine, TargetRegion: in.TargetRegion})
	if err != nil {
		return err
	}
	in.Grant = grant.Token
	run, err := startMigration(cmd.Context(), tc, key, in)
	if err != nil {
		return err
	}
	if ticket == "" && !o.wait {
		started := startedMigration{WorkflowID: run.GetID(), RunID: run.GetRunID()}
		fmt.Fprintf(cmd.ErrOrStderr(), "Follow it with: ironflow migrations show %s\n", run.GetID())
		return render(cmd, started, []startedMigration{started}, startedColumns)
	}
	var progress io.Writer
	if o.wait {
		progress = cmd.ErrOrStderr()
	}
	res, err := moves.Migration.Wait(cmd.Context(), tc, run, migrationProgress(progress))
	if err != nil {
		return waitError(err)
	}
	if ticket != "" {
		_, err = fmt.Fprintf(cmd.OutOrStdout(), "Machine %s migrated to %s\n", key, claims.Endpoint)
		return err
	}
	return render(cmd, res, []workflows.MigrateMachineResult{res}, resultColumns)
}

// migrateArgs reads `KEY to TICKET` or `KEY` with --to.
func migrateArgs(args []string, to string) (key, ticket string, err error) {
	const usage = "ironflow machines migrate KEY to TICKET, or KEY --to REGION"
	switch {
	case len(args) == 0:
		return "", "", errors.New("missing the machine: " + usage)
	case len(args) == 1 && to == "":
		return "", "", fmt.Errorf("missing the destination of %s: %s", args[0], usage)
	case len(args) == 1:
		return args[0], "", nil
	case len(args) > 3 || args[1] != "to":
		return "", "", fmt.Errorf("unexpected %q after %s: %s", strings.Join(args[1:], " "), args[0], usage)
	case len(args) == 2 || strings.TrimSpace(args[2]) == "":
		return "", "", fmt.Errorf("missing the ticket after `to` (did machines migrateTicket fail?): %s", usage)
	case to != "":
		return "", "", errors.New("give either `to TICKET` or --to REGION, not both")
	}
	return args[0], args[2], nil
}

// resolveSource finds the machine's UUID and the source region's name. A name key is
// resolved on the -E region, which must then be the source (or, when only the agent moves,
// the target that already holds the machine).
func (o migrateOptions) resolveSource(cmd *cobra.Command, key, target string) (machineUUID, source string, err error) {
	_, uuidErr := uuid.Parse(key)
	if uuidErr == nil && o.from != "" {
		return key, o.from, nil
	}
	rc := regionClient(cmd)
	info, err := rc.Info(cmd.Context())
	if err != nil {
		return "", "", fmt.Errorf("source region: %w", err)
	}
	source = info.Name
	if o.from != "" {
		if o.from != info.Name && !(o.skipMigration && info.Name == target) {
			return "", "", fmt.Errorf("-E is region %s, not --from %s: point -E at the source region to find %s, or give the machine UUID", info.Name, o.from, key)
		}
		source = o.from
	}
	if uuidErr == nil {
		return key, source, nil
	}
	m, err := rc.Machines().Get(cmd.Context(), machines.key(key))
	if err != nil {
		return "", "", fmt.Errorf("machine %s on region %s: %w", key, info.Name, err)
	}
	return m.Uuid, source, nil
}

// startedMigration is what machines migrate prints when it does not wait.
type startedMigration struct {
	WorkflowID string `json:"WorkflowID"`
	RunID      string `json:"RunID"`
}

var startedColumns = []column[startedMigration]{
	{"WORKFLOW ID", func(s startedMigration) string { return s.WorkflowID }},
	{"RUN ID", func(s startedMigration) string { return s.RunID }},
}

var resultColumns = []column[workflows.MigrateMachineResult]{
	{"MACHINE", func(r workflows.MigrateMachineResult) string { return r.MachineName }},
	{"UUID", func(r workflows.MigrateMachineResult) string { return r.MachineUuid }},
	{"TARGET", func(r workflows.MigrateMachineResult) string { return r.TargetEndpoint }},
	{"JOBS", func(r workflows.MigrateMachineResult) string { return cellInt(r.Jobs) }},
	{"PROFILES", func(r workflows.MigrateMachineResult) string { return cellInt(r.Profiles) }},
	{"AGENT REPOINTED", func(r workflows.MigrateMachineResult) string { return cellBool(r.AgentRepointed) }},
	{"STUB DELETED", func(r workflows.MigrateMachineResult) string { return cellBool(r.StubDeleted) }},
}
