package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/rack/pods"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

func newPodsComposeCommand() *cobra.Command {
	var vm pods.VM
	var memory string
	var storage []string
	c := &cobra.Command{
		Use:   "compose POD",
		Short: "Compose a VM on a pod and declare it as a machine of the region",
		Long: "Compose a VM on a pod (volumes carved from its storage pools, booting from the network first, not started) " +
			"and declare it as a machine with the VM's MAC address and UUID, so it enlists onto that machine when it PXE-boots. " +
			"When the region refuses the machine, the VM is decomposed again. " + podNoun.keyHelp(),
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
			m, err := composeMachine(cmd.Context(), c, pod, vm)
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

// composeMachine composes vm on the pod and declares it in the region: the machine first, then
// the pod's VM list. A step that fails undoes the ones before it.
func composeMachine(ctx context.Context, c *client.Client, pod api.Pod, vm pods.VM) (api.Machine, error) {
	conn, err := pods.Dial(pod.PowerAddress, podDialTimeout)
	if err != nil {
		return api.Machine{}, fmt.Errorf("pod %s: %w", pod.Name, err)
	}
	defer conn.Close()
	composed, err := conn.Compose(vm)
	if err != nil {
		return api.Machine{}, fmt.Errorf("pod %s: %w", pod.Name, err)
	}
	undo := func(cause error) (api.Machine, error) {
		if err := conn.Decompose(composed.UUID); err != nil {
			cause = errors.Join(cause, fmt.Errorf("undo: %w", err))
		}
		return api.Machine{}, cause
	}
	// The machine's UUID is the VM's, which its firmware reports as the SMBIOS UUID: the
	// enlistment matches either identity.
	m, err := c.Machines().Create(ctx, api.Machine{
		Uuid:          composed.UUID,
		Name:          composed.Name,
		HardwareAddrs: []string{composed.MAC},
		Fingerprint:   api.Fingerprint{SystemUUID: composed.UUID},
		Pod:           pod.Uuid,
		Rack:          pod.Rack,
		Status:        api.StatusNew,
	})
	if err != nil {
		return undo(fmt.Errorf("declare machine %s: %w", composed.Name, err))
	}
	if err := setPodVMs(ctx, c, pod, append(slices.Clone(pod.VMs), m.Uuid)); err != nil {
		if derr := c.Machines().Delete(ctx, m.Uuid, false); derr != nil {
			err = errors.Join(err, fmt.Errorf("undo: delete machine %s: %w", m.Name, derr))
		}
		return undo(fmt.Errorf("pod %s: record VM %s: %w", pod.Name, m.Name, err))
	}
	return m, nil
}

// setPodVMs stores the pod's list of VMs (machine UUIDs). Like any patch of the region it is
// last writer wins: two composes on one pod at once can lose an entry.
func setPodVMs(ctx context.Context, c *client.Client, pod api.Pod, vms []string) error {
	patch, err := json.Marshal(map[string]any{"VMs": vms})
	if err != nil {
		return err
	}
	_, err = c.Pods().Patch(ctx, pod.Uuid, patch)
	return err
}

// parseDisks reads --storage POOL:SIZE flags.
func parseDisks(flags []string) ([]pods.Disk, error) {
	disks := make([]pods.Disk, 0, len(flags))
	for _, f := range flags {
		pool, size, ok := strings.Cut(f, ":")
		if !ok || pool == "" {
			return nil, fmt.Errorf("--storage %q: want POOL:SIZE, e.g. default:10G", f)
		}
		n, err := parseSize(size)
		if err != nil {
			return nil, fmt.Errorf("--storage %q: %w", f, err)
		}
		disks = append(disks, pods.Disk{Pool: pool, SizeBytes: n})
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
		Long: "Remove a VM composed on a pod: its domain and its volumes on the hypervisor, then its machine and its entry in the pod's VMs. " +
			"A VM already gone from the hypervisor is not an error, so a decompose that failed half-way can be run again. " + podNoun.keyHelp(),
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
			conn, err := pods.Dial(pod.PowerAddress, podDialTimeout)
			if err != nil {
				return fmt.Errorf("pod %s: %w", pod.Name, err)
			}
			defer conn.Close()
			// The domain's UUID is the machine's (compose made them one).
			if err := conn.Decompose(m.Uuid); err != nil && !errors.Is(err, pods.ErrNoVM) {
				return fmt.Errorf("pod %s: %w", pod.Name, err)
			}
			if err := c.Machines().Delete(cmd.Context(), m.Uuid, false); err != nil {
				return fmt.Errorf("delete machine %s: %w", m.Name, err)
			}
			vms := slices.DeleteFunc(slices.Clone(pod.VMs), func(v string) bool { return v == m.Uuid })
			if err := setPodVMs(cmd.Context(), c, pod, vms); err != nil {
				return fmt.Errorf("pod %s: forget VM %s: %w", pod.Name, m.Name, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Decomposed %s from pod %s\n", m.Name, pod.Name)
			return nil
		},
	}
}
