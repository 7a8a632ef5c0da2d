package main

import (
	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

var machines = noun[api.Machine]{
	kind:     api.KindMachines,
	one:      "machine",
	resource: (*client.Client).Machines,
	columns: []column[api.Machine]{
		{"UUID", func(m api.Machine) string { return m.Uuid }},
		{"NAME", func(m api.Machine) string { return m.Name }},
		{"ADDRESS", func(m api.Machine) string { return m.Address }},
		{"WORKFLOW", func(m api.Machine) string { return m.Workflow }},
		{"STAGE", func(m api.Machine) string { return m.Stage }},
		{"RUNNABLE", func(m api.Machine) string { return cellBool(m.Runnable) }},
		{"LOCKED", func(m api.Machine) string { return cellBool(m.Locked) }},
		{"POOL", func(m api.Machine) string { return m.Pool }},
		{"RACK", func(m api.Machine) string { return m.Rack }},
	},
}

func newMachinesCommand() *cobra.Command { return machines.command(machines.crud()...) }
