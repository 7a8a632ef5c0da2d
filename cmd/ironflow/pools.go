package main

import (
	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

var pools = noun[api.Pool]{
	kind:     api.KindPools,
	one:      "pool",
	resource: (*client.Client).Pools,
	columns: []column[api.Pool]{
		{"NAME", func(p api.Pool) string { return p.Name }},
		{"DESCRIPTION", func(p api.Pool) string { return p.Description }},
	},
}

func newPoolsCommand() *cobra.Command { return pools.command(pools.crud()...) }
