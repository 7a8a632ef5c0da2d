package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/workflows"
)

func newPodsComposeCommand() *cobra.Command {
	var vm api.PodVM
	var memory string
	var storage []string
	c := &cobra.Command{
		Use:   "compose POD",
		Short: "Compose a VM on a pod and declare it as a machine of the region",
		Long: "Have the pod's rack compose a VM on the pod (volumes carved from its storage pools, booting from the network first, not started) " +
			"and declare it as a machine with the VM's MAC address and UUID, so it enlists onto that machine when it PXE-boots " +
			"(a PodCompose workflow on the rack's worker). When a step fails, the VM is decomposed again. " +
			"Takes an operator or admin token. " + podNoun.keyHelp(),
		Example: "  ironflow pods compose kvm-01 --cores 2 --memory 2G --storage default:10G --bridge br0",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if vm.MemoryBytes, err = parseSize(memory); err != nil {
				return fmt.Errorf("--memory: %w", err)
			}
			if vm.Disks, err = parseDisks(storage); err != nil {
				return err
			}
			c := regionClient(cmd)
			pod, err := c.Pods().Get(cmd.Context(), podNoun.key(args[0]))
			if err != nil {
				return err
			}
			if vm.Name == "" {
				vm.Name = pod.Name + "-" + uuid.NewString()[:8]
			}
			var res workflows.PodComposeResult
			w := podWork{id: workflows.PodComposeID(pod.Uuid, vm.Name), workflow: workflows.PodCompose,
				input: func(t workflows.PodTarget) any { return workflows.PodComposeInput{PodTarget: t, VM: vm} }}
			if err := runPodWork(cmd, pod, w, &res); err != nil {
				return err
			}
			m, err := c.Machines().Get(cmd.Context(), res.Machine)
			if err != nil {
				return err
			}
			return machines.print(cmd, m)
		},
	}
	f := c.Flags()
	f.StringVar(&vm.Name, "name", "", "the VM's and machine's name (default POD-<random>)")
	f.IntVar(&vm.Cores, "cores", 1, "virtual CPUs")
	f.StringVar(&memory, "memory", "1G", "memory, with a K, M, G or T suffix (powers of 1024)")
	f.StringArrayVar(&storage, "storage", nil, "a disk as POOL:SIZE, e.g. default:10G (repeat for more disks)")
	f.StringVar(&vm.NIC.Bridge, "bridge", "", "the host bridge the VM's NIC joins (the rack's network)")
	f.StringVar(&vm.NIC.Network, "network", "", "the libvirt network the VM's NIC joins, instead of --bridge")
	f.StringVar(&vm.Arch, "arch", "", "the VM's architecture (default the pod's)")
	return c
}

// parseDisks reads --storage POOL:SIZE flags.
func parseDisks(flags []string) ([]api.PodDisk, error) {
	disks := make([]api.PodDisk, 0, len(flags))
	for _, f := range flags {
		pool, size, ok := strings.Cut(f, ":")
		if !ok || pool == "" {
			return nil, fmt.Errorf("--storage %q: want POOL:SIZE, e.g. default:10G", f)
		}
		n, err := parseSize(size)
		if err != nil {
			return nil, fmt.Errorf("--storage %q: %w", f, err)
		}
		disks = append(disks, api.PodDisk{Pool: pool, SizeBytes: n})
	}
	return disks, nil
}

// parseSize reads a byte count with an optional K, M, G or T suffix (powers of 1024).
func parseSize(s string) (uint64, error) {
	shift := map[byte]uint{'K': 10, 'M': 20, 'G': 30, 'T': 40}
	num, by := s, uint(0)
	if n := len(s); n > 0 {
		if sh, ok := shift[s[n-1]]; ok {
			num, by = s[:n-1], sh
		}
	}
	v, err := strconv.ParseUint(num, 10, 64)
	if err != nil || v == 0 || v > (1<<63)>>by {
		return 0, fmt.Errorf("size %q: want a positive whole number with an optional K, M, G or T suffix", s)
	}
	return v << by, nil
}

func newPodsDecomposeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "decompose POD MACHINE",
		Short: "Remove a VM composed on a pod (its domain and volumes) and its machine",
		Long: "Have the pod's rack remove a VM composed on the pod: its domain and its volumes on the hypervisor, then its machine " +
			"and its entry in the pod's VMs (a PodDecompose workflow on the rack's worker). A VM already gone from the hypervisor " +
			"is not an error, so a decompose that failed half-way can be run again. Takes an operator or admin token. " + podNoun.keyHelp(),
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := regionClient(cmd)
			pod, err := c.Pods().Get(cmd.Context(), podNoun.key(args[0]))
			if err != nil {
				return err
			}
			m, err := c.Machines().Get(cmd.Context(), machines.key(args[1]))
			if err != nil {
				return err
			}
			if m.Pod != pod.Uuid {
				return fmt.Errorf("machine %s is not a VM of pod %s", m.Name, pod.Name)
			}
			return decomposeVM(cmd, pod, m)
		},
	}
}

// decomposeVM runs PodDecompose for machine m of pod.
func decomposeVM(cmd *cobra.Command, pod api.Pod, m api.Machine) error {
	w := podWork{id: workflows.PodDecomposeID(m.Uuid), workflow: workflows.PodDecompose,
		input: func(t workflows.PodTarget) any { return workflows.PodVMInput{PodTarget: t, Machine: m.Uuid} }}
	if err := runPodWork(cmd, pod, w, nil); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "Decomposed %s from pod %s\n", m.Name, pod.Name)
	return nil
}
