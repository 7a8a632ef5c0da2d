package main

import (
	"fmt"

	"github.com/spf13/cobra"

	rackacts "github.com/ironflow/ironflow/activities/rack"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/workflows"
)

// A machine composed on a pod knows its pod (Machine.Pod): its power goes through the pod's
// rack, and deleting it takes the VM with it or is refused.

func newMachinesPowerCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "power on|off|cycle KEY",
		Short: "Power a machine composed on a pod on, off or through a cycle",
		Long: "Power a VM composed on a KVM pod through the pod's rack (a PodPower workflow on the rack's worker) and print its power state. " +
			"off is a hard stop, as a pulled plug. Only machines composed on a pod (their Pod is set) have a power driver yet. " +
			"Takes an operator or admin token. " + machines.keyHelp(),
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			action, err := api.ParsePowerAction(args[0])
			if err != nil {
				return err
			}
			m, pod, err := podOfMachine(cmd, args[1])
			if err != nil {
				return err
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
		},
	}
	addTemporalFlags(c)
	return c
}

// podOfMachine reads machine key and the pod it was composed on.
func podOfMachine(cmd *cobra.Command, key string) (api.Machine, api.Pod, error) {
	c := regionClient(cmd)
	m, err := c.Machines().Get(cmd.Context(), machines.key(key))
	if err != nil {
		return m, api.Pod{}, err
	}
	if m.Pod == "" {
		return m, api.Pod{}, fmt.Errorf("machine %s was not composed on a pod: it has no power driver in Ironflow", m.Name)
	}
	pod, err := c.Pods().Get(cmd.Context(), m.Pod)
	if err != nil {
		return m, pod, fmt.Errorf("machine %s: its pod %s: %w", m.Name, m.Pod, err)
	}
	return m, pod, nil
}

// withPodVMDelete adds --decompose to `machines delete`: for a VM composed on a pod it
// decomposes the VM through the pod's rack, which deletes the machine too. Without it the
// region refuses to delete such a machine alone unless forced (the record only).
func withPodVMDelete(c *cobra.Command) *cobra.Command {
	var decompose bool
	deleteRecord := c.RunE
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if !decompose {
			return deleteRecord(cmd, args)
		}
		if force, _ := cmd.Flags().GetBool("force"); force {
			return fmt.Errorf("--decompose and --force: give one (--force deletes only the machine and leaves its VM)")
		}
		m, pod, err := podOfMachine(cmd, args[0])
		if err != nil {
			return fmt.Errorf("--decompose: %w", err)
		}
		return decomposeVM(cmd, pod, m)
	}
	c.Flags().BoolVar(&decompose, "decompose", false, "for a machine composed on a pod: decompose its VM (domain and volumes) through the pod's rack, which deletes the machine too")
	addTemporalFlags(c)
	return c
}
