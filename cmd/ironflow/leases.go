package main

import (
	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

var leases = noun[api.Lease]{
	kind:     api.KindLeases,
	one:      "lease",
	resource: (*client.Client).Leases,
	bare:     "Addr",
	columns: []column[api.Lease]{
		{"ADDRESS", func(l api.Lease) string { return l.Addr }},
		{"MAC", func(l api.Lease) string { return l.MAC }},
		{"STATE", func(l api.Lease) string { return l.State }},
		{"HOSTNAME", func(l api.Lease) string { return l.Hostname }},
		{"SUBNET", func(l api.Lease) string { return l.Subnet }},
		{"RACK", func(l api.Lease) string { return l.Rack }},
		{"EXPIRES", func(l api.Lease) string { return cellTime(l.Expires) }},
	},
}

// Racks write leases through their own API; operators read them (Addr:10.0.0.5, MAC:...).
func newLeasesCommand() *cobra.Command { return leases.command(leases.list(), leases.show()) }
