package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	rackacts "github.com/ironflow/ironflow/activities/rack"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/workflows"
	"github.com/ironflow/ironflow/workflows/moves"
)

// Machine power (ARCHITECTURE.md "Power"): the machine's rack drives its BMC, in a workflow
// the CLI starts and waits for after the -E region granted the caller power on the machine.
// A pod VM's on, off and cycle go through its pod (PodPower) as before.

func newMachinesPowerCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "power on|off|cycle|status KEY",
		Short: "Power a machine on, off or through a cycle through its BMC, or read its power state",
		Long: "Power a machine through its power driver (`machines set-power`: ipmi, manual; a VM composed on a pod through its pod) " +
			"on the machine's rack and print its power state. off is a hard stop, as a pulled plug; on and cycle first ask the BMC " +
			"to boot from the network (a BMC that refuses it boots as its firmware says). A manual machine's action is recorded and " +
			"left to an operator. Every action is audited on the region. Takes an operator or admin token. " + machines.keyHelp(),
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			action, err := api.ParsePowerRequest(args[0])
			if err != nil {
				return err
			}
			m, err := regionClient(cmd).Machines().Get(cmd.Context(), machines.key(args[1]))
			if err != nil {
				return err
			}
			if m.Pod != "" && action != api.PowerStatusAction {
				return powerPodVM(cmd, m, action)
			}
			res, err := runMachinePower(cmd, m, action)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if res.NeedsOperator {
				_, err = fmt.Fprintf(out, "Machine %s needs an operator: %s\n", m.Name, res.Message)
				return err
			}
			if res.BootNote != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "note: %s\n", res.BootNote)
			}
			_, err = fmt.Fprintf(out, "Machine %s is %s\n", m.Name, res.State)
			return err
		},
	}
	addTemporalFlags(c)
	return c
}

// powerPodVM powers a VM composed on a pod through its pod's rack (PodPower).
func powerPodVM(cmd *cobra.Command, m api.Machine, action api.PowerAction) error {
	pod, err := regionClient(cmd).Pods().Get(cmd.Context(), m.Pod)
	if err != nil {
		return fmt.Errorf("machine %s: its pod %s: %w", m.Name, m.Pod, err)
	}
	var res rackacts.PowerVMResult
	w := podWork{id: workflows.PodPowerID(m.Uuid), workflow: workflows.PodPower,
		input: func(t workflows.PodTarget) any {
			return workflows.PodPowerInput{PodVMInput: workflows.PodVMInput{PodTarget: t, Machine: m.Uuid}, Action: action}
		}}
	if err := runPodWork(cmd, pod, w, &res); err != nil {
		return err
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "Machine %s is %s\n", m.Name, res.State)
	return err
}

// runMachinePower has the -E region grant power on m, starts MachinePower on m's rack and
// waits for its result.
func runMachinePower(cmd *cobra.Command, m api.Machine, action api.PowerAction) (rackacts.PowerMachineResult, error) {
	var res rackacts.PowerMachineResult
	rack, err := powerRack(cmd, m)
	if err != nil {
		return res, err
	}
	g, err := regionClient(cmd).IssueGrant(cmd.Context(), api.GrantRequest{Kind: api.GrantPower, Key: m.Uuid})
	if err != nil {
		return res, fmt.Errorf("the region did not authorise power on machine %s (it takes an operator or admin token, and no migration may hold the machine): %w", m.Name, err)
	}
	tc, err := dialTemporal(cmd, cliLogger(cmd))
	if err != nil {
		return res, err
	}
	defer tc.Close()
	if err := moves.RackPolls(cmd.Context(), tc, rack); err != nil {
		return res, fmt.Errorf("machine %s: %w", m.Name, err)
	}
	in := workflows.MachinePowerInput{Machine: m.Uuid, Rack: rack, Grant: g.Token, Action: action}
	run, err := moves.StartPodWork(cmd.Context(), tc, workflows.MachinePowerID(m.Uuid), g.Token, workflows.MachinePower, in)
	var running *moves.AlreadyRunningError
	if errors.As(err, &running) {
		return res, fmt.Errorf("machine %s: %s", m.Name, running)
	}
	if err != nil {
		return res, fmt.Errorf("machine %s: start %s: %w", m.Name, workflows.MachinePowerID(m.Uuid), err)
	}
	if err := run.Get(cmd.Context(), &res); err != nil {
		return res, fmt.Errorf("machine %s: %s", m.Name, moves.FailureMessage(err))
	}
	return res, nil
}

// powerRack is the rack that reaches m's power: its pod's for a pod VM, else its own.
func powerRack(cmd *cobra.Command, m api.Machine) (string, error) {
	if m.Pod != "" {
		pod, err := regionClient(cmd).Pods().Get(cmd.Context(), m.Pod)
		if err != nil {
			return "", fmt.Errorf("machine %s: its pod %s: %w", m.Name, m.Pod, err)
		}
		return pod.Rack, nil
	}
	if m.Power == nil || m.Power.Type == "" {
		return "", fmt.Errorf("machine %s has no power driver in Ironflow: set one with `ironflow machines set-power %s --power-type ipmi --power-address BMC --power-user USER --power-password-file FILE`", m.Name, m.Name)
	}
	if m.Rack == "" {
		return "", fmt.Errorf("machine %s has no Rack: the rack on the BMC's network drives its power (ironflow machines update %s '{\"Rack\": \"RACK-UUID\"}')", m.Name, m.Name)
	}
	return m.Rack, nil
}

func newMachinesSetPowerCommand() *cobra.Command {
	var cfg api.PowerConfig
	var passwordFile string
	c := &cobra.Command{
		Use:   "set-power KEY",
		Short: "Set a machine's power driver and its BMC credentials",
		Long: "Set how the machine's rack powers it: --power-type ipmi (IPMI v2.0 lanplus; --power-address host[:port], port 623 by default, " +
			"--power-user, and the password read from --power-password-file, which is stored as a machine secret and never shown) or manual " +
			"(an operator powers it by hand). Without --power-password-file an ipmi driver keeps the stored password. A BMC address serves " +
			"one machine. Takes an operator or admin token. " + machines.keyHelp(),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := readPowerPassword(passwordFile, &cfg); err != nil {
				return err
			}
			m, err := regionClient(cmd).SetPower(cmd.Context(), machines.key(args[0]), cfg)
			if err != nil {
				return err
			}
			return writeJSON(cmd.OutOrStdout(), m)
		},
	}
	f := c.Flags()
	f.StringVar(&cfg.Type, "power-type", "", "power driver: ipmi or manual")
	f.StringVar(&cfg.Address, "power-address", "", "the BMC's host[:port] (ipmi; port 623 by default)")
	f.StringVar(&cfg.User, "power-user", "", "the BMC user (ipmi)")
	f.StringVar(&passwordFile, "power-password-file", "", "file holding the BMC password (ipmi; one line)")
	_ = c.MarkFlagRequired("power-type")
	return c
}

// readPowerPassword sets cfg's Password from the one line of file, when a file is named.
func readPowerPassword(file string, cfg *api.PowerConfig) error {
	if file == "" {
		return nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("--power-password-file: %w", err)
	}
	cfg.Password = strings.TrimRight(string(b), "\r\n")
	if cfg.Password == "" {
		return fmt.Errorf("--power-password-file %s is empty", file)
	}
	return nil
}

// machinePowerCell is the POWER column of `machines list`: the state the rack last saw, "-"
// for a machine without a power driver.
func machinePowerCell(m api.Machine) string {
	switch {
	case m.Power == nil && m.Pod != "":
		return string(api.PowerStateUnknown)
	case m.Power == nil || m.Power.State == "":
		return "-"
	}
	return string(m.Power.State)
}
