package main

import (
	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

// The network nouns: fabrics hold VLANs, VLANs hold subnets.

var subnets = noun[api.Subnet]{
	kind:     api.KindSubnets,
	one:      "subnet",
	resource: (*client.Client).Subnets,
	columns: []column[api.Subnet]{
		{"UUID", func(s api.Subnet) string { return s.Uuid }},
		{"NAME", func(s api.Subnet) string { return s.Name }},
		{"CIDR", func(s api.Subnet) string { return s.CIDR }},
		{"VLAN", func(s api.Subnet) string { return s.VLAN }},
		{"GATEWAY", func(s api.Subnet) string { return s.Gateway }},
		{"DYNAMIC", func(s api.Subnet) string {
			if s.DynamicRange.Start == "" {
				return ""
			}
			return s.DynamicRange.Start + "-" + s.DynamicRange.End
		}},
	},
}

var fabrics = noun[api.Fabric]{
	kind:     api.KindFabrics,
	one:      "fabric",
	resource: (*client.Client).Fabrics,
	columns: []column[api.Fabric]{
		{"UUID", func(f api.Fabric) string { return f.Uuid }},
		{"NAME", func(f api.Fabric) string { return f.Name }},
		{"DESCRIPTION", func(f api.Fabric) string { return f.Description }},
	},
}

var vlans = noun[api.VLAN]{
	kind:     api.KindVLANs,
	one:      "VLAN",
	resource: (*client.Client).VLANs,
	columns: []column[api.VLAN]{
		{"UUID", func(v api.VLAN) string { return v.Uuid }},
		{"FABRIC", func(v api.VLAN) string { return v.Fabric }},
		{"VID", func(v api.VLAN) string { return cellInt(v.VID) }},
		{"NAME", func(v api.VLAN) string { return v.Name }},
		{"MTU", func(v api.VLAN) string { return cellInt(v.MTU) }},
		{"DHCP", func(v api.VLAN) string { return cellBool(v.DHCPOn) }},
		{"PRIMARY RACK", func(v api.VLAN) string { return v.PrimaryRack }},
		{"SECONDARY RACK", func(v api.VLAN) string { return v.SecondaryRack }},
	},
}

func newSubnetsCommand() *cobra.Command { return subnets.command(subnets.crud()...) }
func newFabricsCommand() *cobra.Command { return fabrics.command(fabrics.crud()...) }
func newVLANsCommand() *cobra.Command   { return vlans.command(vlans.crud()...) }
