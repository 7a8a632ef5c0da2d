package main

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/workflows"
	"github.com/ironflow/ironflow/workflows/moves"
)

// Adding a machine by its BMC and commissioning it (ARCHITECTURE.md "Commissioning"): the CLI
// creates the record, sets its power as set-power does, and starts CommissionMachine on the
// machine's rack after the -E region granted the caller power on the machine.

// commissionOptions are the flags of machines add and machines commission.
type commissionOptions struct {
	wait    bool
	timeout time.Duration
}

func (o *commissionOptions) flags(c *cobra.Command) {
	c.Flags().BoolVar(&o.wait, "wait", false, "wait until the machine is Ready or its commissioning failed")
	c.Flags().DurationVar(&o.timeout, "timeout", workflows.DefaultCommissionTimeout,
		fmt.Sprintf("how long to wait for the machine to network-boot, enlist and upload its commissioning results (at most %s)", workflows.MaxCommissionTimeout))
	addTemporalFlags(c)
}

func newMachinesAddCommand() *cobra.Command {
	var cfg api.PowerConfig
	var passwordFile, rack string
	var o commissionOptions
	c := &cobra.Command{
		Use:   "add NAME",
		Short: "Add a machine by its BMC and commission it",
		Long: "Create machine NAME behind a rack, give it a power driver as set-power does, and commission it: the rack checks " +
			"that the BMC answers, powers the machine on to boot the discovery image from the network, waits until the machine " +
			"has enlisted onto this record (matched by the BMC address it reads in-band) and uploaded its inventory and " +
			"commissioning results, powers it off and sets its Status to Ready. When a step fails, the machine never boots within " +
			"--timeout, or the workflow is cancelled, the machine is powered off and its Status is \"Failed commissioning\" with " +
			"the step and why (StatusReason). --rack is the rack on the BMC's network; without it, the region's only rack. " +
			"A BMC address serves one machine. Takes an operator or admin token.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfg.Type != api.PowerTypeIPMI {
				return fmt.Errorf("--power-type %q: a machine is added by its BMC with --power-type %s (declare others with `machines create` and `machines set-power`)", cfg.Type, api.PowerTypeIPMI)
			}
			if err := readPowerPassword(passwordFile, &cfg); err != nil {
				return err
			}
			if err := checkCommissionTimeout(o.timeout); err != nil {
				return err
			}
			rackUUID, err := addRack(cmd, rack)
			if err != nil {
				return err
			}
			rc := regionClient(cmd)
			m, err := rc.Machines().Create(cmd.Context(), api.Machine{Name: args[0], Rack: rackUUID, BMCAddress: bmcHost(cfg.Address), Status: api.StatusNew})
			if err != nil {
				return err
			}
			powered, err := rc.SetPower(cmd.Context(), m.Uuid, cfg)
			if err != nil {
				// Nothing half-made: a machine without its power cannot be commissioned.
				if derr := rc.Machines().Delete(cmd.Context(), m.Uuid, false); derr != nil {
					return fmt.Errorf("machine %s: set its power: %w (and delete it again: %v)", m.Name, err, derr)
				}
				return fmt.Errorf("machine %s not added: %w", args[0], err)
			}
			if err := commission(cmd, powered, o); err != nil {
				return fmt.Errorf("%w (machine %s was added: run `ironflow machines commission %s` to try again)", err, m.Name, m.Name)
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&cfg.Type, "power-type", "", "power driver: ipmi")
	f.StringVar(&cfg.Address, "power-address", "", "the BMC's host[:port] (port 623 by default); an IP address is the one the machine reports in-band")
	f.StringVar(&cfg.User, "power-user", "", "the BMC user")
	f.StringVar(&passwordFile, "power-password-file", "", "file holding the BMC password (one line)")
	f.StringVar(&rack, "rack", "", "UUID or Name of the rack on the BMC's network (default: the region's only rack)")
	for _, name := range []string{"power-type", "power-address", "power-user", "power-password-file"} {
		_ = c.MarkFlagRequired(name)
	}
	o.flags(c)
	return c
}

func newMachinesCommissionCommand() *cobra.Command {
	var o commissionOptions
	c := &cobra.Command{
		Use:   "commission KEY",
		Short: "Commission a known machine again through its BMC",
		Long: "Commission the machine as `machines add` does: its inventory and commissioning results are replaced by what it " +
			"reports now. The machine needs a power driver (set-power) and a Rack. Takes an operator or admin token. " + machines.keyHelp(),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkCommissionTimeout(o.timeout); err != nil {
				return err
			}
			m, err := regionClient(cmd).Machines().Get(cmd.Context(), machines.key(args[0]))
			if err != nil {
				return err
			}
			return commission(cmd, m, o)
		},
	}
	o.flags(c)
	return c
}

func checkCommissionTimeout(d time.Duration) error {
	if d <= 0 || d > workflows.MaxCommissionTimeout {
		return fmt.Errorf("--timeout %s is outside (0, %s]", d, workflows.MaxCommissionTimeout)
	}
	return nil
}

// addRack is the rack given by UUID or Name, else the region's only rack.
func addRack(cmd *cobra.Command, key string) (string, error) {
	if key != "" {
		r, err := regionClient(cmd).Racks().Get(cmd.Context(), racks.key(key))
		if err != nil {
			return "", fmt.Errorf("--rack %s: %w", key, err)
		}
		return r.Uuid, nil
	}
	all, err := regionClient(cmd).Racks().List(cmd.Context(), url.Values{})
	if err != nil {
		return "", err
	}
	if len(all) != 1 {
		return "", fmt.Errorf("the region has %d racks: name the one on the BMC's network with --rack", len(all))
	}
	return all[0].Uuid, nil
}

// bmcHost is the IP address of a BMC's host[:port], which enlistment matches the address the
// machine reports in-band against; "" for a host name.
func bmcHost(addr string) string {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return ""
	}
	return a.String()
}

// commission has the -E region grant power on m, starts CommissionMachine on m's rack and,
// with --wait, waits for its result.
func commission(cmd *cobra.Command, m api.Machine, o commissionOptions) error {
	rack, err := powerRack(cmd, m)
	if err != nil {
		return err
	}
	if m.Pod != "" {
		return fmt.Errorf("machine %s is a VM of pod %s: its pod declared it, and it enlists when it boots", m.Name, m.Pod)
	}
	g, err := regionClient(cmd).IssueGrant(cmd.Context(), api.GrantRequest{Kind: api.GrantPower, Key: m.Uuid})
	if err != nil {
		return fmt.Errorf("the region did not authorise power on machine %s (it takes an operator or admin token, and no migration may hold the machine): %w", m.Name, err)
	}
	tc, err := dialTemporal(cmd, cliLogger(cmd))
	if err != nil {
		return err
	}
	defer tc.Close()
	if err := moves.RackPolls(cmd.Context(), tc, rack); err != nil {
		return fmt.Errorf("machine %s: %w", m.Name, err)
	}
	id := workflows.CommissionMachineID(m.Uuid)
	in := workflows.CommissionMachineInput{Machine: m.Uuid, Rack: rack, Grant: g.Token, Timeout: o.timeout}
	run, err := moves.StartPodWork(cmd.Context(), tc, id, g.Token, workflows.CommissionMachine, in)
	var running *moves.AlreadyRunningError
	if errors.As(err, &running) {
		return fmt.Errorf("machine %s: %s", m.Name, running)
	}
	if err != nil {
		return fmt.Errorf("machine %s: start %s: %w", m.Name, id, err)
	}
	out := cmd.OutOrStdout()
	if !o.wait {
		_, err = fmt.Fprintf(out, "Commissioning machine %s (%s): workflow %s; `ironflow machines get %s` shows its Status\n", m.Name, m.Uuid, id, m.Name)
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "Commissioning machine %s (%s): workflow %s, waiting up to %s for it to boot and enlist\n", m.Name, m.Uuid, id, o.timeout)
	var res workflows.CommissionMachineResult
	if err := run.Get(cmd.Context(), &res); err != nil {
		return fmt.Errorf("machine %s: %s", m.Name, moves.FailureMessage(err))
	}
	if res.BootNote != "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "note: %s\n", res.BootNote)
	}
	_, err = fmt.Fprintf(out, "Machine %s is %s (%d commissioning results)\n", m.Name, res.Status, res.Scripts)
	return err
}
