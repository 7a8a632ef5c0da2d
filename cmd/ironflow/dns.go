package main

import (
	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

// The DNS nouns: the region's domains and the operators' records in them.

var domains = noun[api.Domain]{
	kind:     api.KindDomains,
	one:      "domain",
	resource: (*client.Client).Domains,
	columns: []column[api.Domain]{
		{"NAME", func(d api.Domain) string { return d.Name }},
		{"DEFAULT", func(d api.Domain) string { return cellBool(d.Default) }},
		{"TTL", func(d api.Domain) string { return cellInt(d.TTL) }},
		{"UPSTREAMS", func(d api.Domain) string { return cellList(d.Upstreams) }},
		{"DESCRIPTION", func(d api.Domain) string { return d.Description }},
	},
}

var dnsRecords = noun[api.DNSRecord]{
	kind:     api.KindDNSRecords,
	one:      "DNS record",
	resource: (*client.Client).DNSRecords,
	columns: []column[api.DNSRecord]{
		{"UUID", func(r api.DNSRecord) string { return r.Uuid }},
		{"NAME", func(r api.DNSRecord) string { return r.Name }},
		{"DOMAIN", func(r api.DNSRecord) string { return r.Domain }},
		{"TYPE", func(r api.DNSRecord) string { return r.Type }},
		{"DATA", func(r api.DNSRecord) string { return r.Data }},
		{"TTL", func(r api.DNSRecord) string { return cellInt(r.TTL) }},
	},
}

func newDomainsCommand() *cobra.Command    { return domains.command(domains.crud()...) }
func newDNSRecordsCommand() *cobra.Command { return dnsRecords.command(dnsRecords.crud()...) }
