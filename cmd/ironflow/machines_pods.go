package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/region/api"
)

// A machine composed on a pod knows its pod (Machine.Pod): its power goes through the pod's
// rack (machines_power.go), and deleting it takes the VM with it or is refused.

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
