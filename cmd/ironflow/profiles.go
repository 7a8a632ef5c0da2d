package main

import (
	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

var profiles = noun[api.Profile]{
	kind:     api.KindProfiles,
	one:      "profile",
	resource: (*client.Client).Profiles,
	columns: []column[api.Profile]{
		{"NAME", func(p api.Profile) string { return p.Name }},
		{"DESCRIPTION", func(p api.Profile) string { return p.Description }},
		{"PROFILES", func(p api.Profile) string { return cellList(p.Profiles) }},
		{"PARAMS", func(p api.Profile) string { return cellInt(len(p.Params)) }},
	},
}

func newProfilesCommand() *cobra.Command { return profiles.command(profiles.crud()...) }
