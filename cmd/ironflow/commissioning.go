package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

var commissioningScripts = noun[api.CommissioningScript]{
	kind:     api.KindCommissioningScripts,
	one:      "commissioning script",
	resource: (*client.Client).CommissioningScripts,
	columns: []column[api.CommissioningScript]{
		{"NAME", func(s api.CommissioningScript) string { return s.Name }},
		{"TIMEOUT", func(s api.CommissioningScript) string { return cellInt(s.TimeoutSeconds) }},
		{"DESCRIPTION", func(s api.CommissioningScript) string { return s.Description }},
		{"SCRIPT", func(s api.CommissioningScript) string { return firstLine(s.Script) }},
	},
}

func newCommissioningScriptsCommand() *cobra.Command {
	return commissioningScripts.command(commissioningScripts.crud()...)
}

// firstLine is the first line of a script, marked when more follow.
func firstLine(s string) string {
	line, rest, _ := strings.Cut(strings.TrimSpace(s), "\n")
	if rest != "" {
		line += " …"
	}
	return line
}
