package main

import (
	"fmt"

	"github.com/spf13/cobra"

	rackacts "github.com/ironflow/ironflow/activities/rack"
	"github.com/ironflow/ironflow/rack/pods"
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
			action, err := pods.ParsePowerAction(args[0])
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

// withPodVMDelete makes `machines delete` of a VM composed on a pod decompose it with
// --decompose, delete only the record with --force, and else refuse, saying so: a machine
// deleted alone would leave its VM and volumes on the pod.
func withPodVMDelete(c *cobra.Command) *cobra.Command {
	var decompose bool
	deleteRecord := c.RunE
	c.RunE = func(cmd *cobra.Command, args []string) error {
		force, _ := cmd.Flags().GetBool("force")
		m, err := regionClient(cmd).Machines().Get(cmd.Context(), machines.key(args[0]))
		switch {
		case err != nil && decompose:
			return err
		case err != nil || m.Pod == "" && !decompose:
			return deleteRecord(cmd, args) // the region says what is wrong, if anything
		case m.Pod == "":
			return fmt.Errorf("--decompose: machine %s was not composed on a pod", m.Name)
		case decompose:
			_, pod, err := podOfMachine(cmd, m.Uuid)
			if err != nil {
				return err
			}
			return decomposeVM(cmd, pod, m)
		case force:
			return deleteRecord(cmd, args)
		}
		return fmt.Errorf("machine %s is a VM composed on pod %s: delete it with --decompose to remove the VM and its volumes too "+
			"(or ironflow pods decompose), or with --force to delete only the machine and leave the VM on the pod", m.Name, m.Pod)
	}
	c.Flags().BoolVar(&decompose, "decompose", false, "for a machine composed on a pod: decompose its VM (domain and volumes) through the pod's rack, then delete the machine")
	addTemporalFlags(c)
	return c
}
