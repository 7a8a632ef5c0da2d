package main

import (
	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

var pods = noun[api.Pod]{
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
		{"VMS", func(p api.Pod) string { return cellInt(len(p.VMs)) }},
	},
}

func newPodsCommand() *cobra.Command { return pods.command(pods.crud()...) }
