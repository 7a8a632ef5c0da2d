package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
	"github.com/ironflow/ironflow/workflows"
)

var podNoun = noun[api.Pod]{
	kind:     api.KindPods,
	one:      "pod",
	resource: (*client.Client).Pods,
	columns: []column[api.Pod]{
		{"UUID", func(p api.Pod) string { return p.Uuid }},
		{"NAME", func(p api.Pod) string { return p.Name }},
		{"TYPE", func(p api.Pod) string { return p.Type }},
		{"POWER ADDRESS", func(p api.Pod) string { return p.PowerAddress }},
		{"RACK", func(p api.Pod) string { return p.Rack }},
		{"POOL", func(p api.Pod) string { return p.Pool }},
		{"ARCH", func(p api.Pod) string { return p.Arch }},
		{"STORAGE FREE GiB", func(p api.Pod) string {
			if len(p.StoragePools) == 0 {
				return ""
			}
			_, _, free := p.StorageUsage()
			return cellInt(int(free >> 30))
		}},
		{"VMS", func(p api.Pod) string { return cellInt(len(p.VMs)) }},
	},
}

func newPodsCommand() *cobra.Command {
	c := podNoun.command(append(podNoun.crud(), newPodsAddCommand(), newPodsRefreshCommand(), newPodsComposeCommand(), newPodsDecomposeCommand())...)
	addTemporalFlags(c)
	return c
}

func newPodsAddCommand() *cobra.Command {
	var pod api.Pod
	c := &cobra.Command{
		Use:   "add NAME --type virsh --address URI --rack RACK",
		Short: "Add a KVM pod that a rack drives",
		Long: "Add a KVM pod: a libvirt host its rack reaches at --address, qemu:///system on the rack's own host or " +
			"qemu+ssh://user@host[:port]/system through SSH, logging in with the rack's --pod-ssh-key and accepting only --host-key. " +
			"Then `ironflow pods refresh NAME` reads its facts.",
		Example: "  ironflow pods add kvm-01 --type virsh --address qemu+ssh://root@10.0.0.5/system --host-key \"$(ssh-keyscan -t ed25519 10.0.0.5 | cut -d' ' -f2-)\" --rack rack-1",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pod.Name = args[0]
			c := regionClient(cmd)
			if pod.Rack != "" {
				r, err := c.Racks().Get(cmd.Context(), racks.key(pod.Rack))
				if err != nil {
					return fmt.Errorf("--rack %s: %w", pod.Rack, err)
				}
				pod.Rack = r.Uuid
			}
			created, err := c.Pods().Create(cmd.Context(), pod)
			if err != nil {
				return err
			}
			return podNoun.print(cmd, created)
		},
	}
	f := c.Flags()
	f.StringVar(&pod.Type, "type", "virsh", "the pod's type (virsh: libvirt with QEMU/KVM)")
	f.StringVar(&pod.PowerAddress, "address", "", "libvirt URI: qemu:///system[?socket=PATH] or qemu+ssh://user@host[:port]/system")
	f.StringVar(&pod.HostKey, "host-key", "", "for qemu+ssh: the host's SSH public key as in known_hosts (\"ssh-ed25519 AAAA...\")")
	f.StringVar(&pod.Rack, "rack", "", "the rack that drives the pod (UUID or name)")
	f.StringVar(&pod.Pool, "pool", "", "the machine pool of the pod's VMs")
	return c
}

func newPodsRefreshCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "refresh KEY",
		Short: "Have the pod's rack read its architecture, CPUs, memory, storage pools and networks and store them",
		Long: "Have the pod's rack read the pod's facts from its libvirt daemon and store them on the pod in one update " +
			"(a PodRefresh workflow on the rack's worker; the rack also refreshes its pods on its own schedule). " +
			"An unreachable hypervisor leaves the stored facts as they were. Takes an operator or admin token. " + podNoun.keyHelp(),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := regionClient(cmd)
			pod, err := c.Pods().Get(cmd.Context(), podNoun.key(args[0]))
			if err != nil {
				return err
			}
			w := podWork{id: workflows.PodRefreshID(pod.Uuid), workflow: workflows.PodRefresh, input: func(t workflows.PodTarget) any { return t }}
			if err := runPodWork(cmd, pod, w, nil); err != nil {
				return err
			}
			// By UUID: the pod refreshed is the one read, even if renamed meanwhile.
			updated, err := c.Pods().Get(cmd.Context(), pod.Uuid)
			if err != nil {
				return err
			}
			return podNoun.print(cmd, updated)
		},
	}
}
