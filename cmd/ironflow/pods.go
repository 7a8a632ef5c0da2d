package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/rack/pods"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
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
	return podNoun.command(append(podNoun.crud(), newPodsRefreshCommand(), newPodsComposeCommand(), newPodsDecomposeCommand())...)
}

// podDialTimeout bounds reaching a pod's libvirt daemon.
const podDialTimeout = 15 * time.Second

func newPodsRefreshCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "refresh KEY",
		Short: "Read a pod's architecture, CPUs, memory, storage pools and networks from its hypervisor and store them",
		Long: "Read a pod's facts from the libvirt daemon at its PowerAddress and store them on the pod in one update. " +
			"Only a daemon on this host is reachable yet (qemu:///system, or qemu:///system?socket=PATH). " + podNoun.keyHelp(),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := regionClient(cmd)
			key := podNoun.key(args[0])
			pod, err := c.Pods().Get(cmd.Context(), key)
			if err != nil {
				return err
			}
			conn, err := pods.Dial(pod.PowerAddress, podDialTimeout)
			if err != nil {
				return fmt.Errorf("pod %s: %w", pod.Name, err)
			}
			defer conn.Close()
			facts, err := conn.Discover()
			if err != nil {
				return fmt.Errorf("pod %s: %w", pod.Name, err)
			}
			patch, err := facts.RegionPatch()
			if err != nil {
				return err
			}
			// By UUID: the pod refreshed is the one read, even if renamed meanwhile.
			updated, err := c.Pods().Patch(cmd.Context(), pod.Uuid, patch)
			if err != nil {
				return err
			}
			return podNoun.print(cmd, updated)
		},
	}
}
