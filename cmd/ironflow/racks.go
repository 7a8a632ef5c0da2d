package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

var racks = noun[api.Rack]{
	kind:     api.KindRacks,
	one:      "rack",
	resource: (*client.Client).Racks,
	columns: []column[api.Rack]{
		{"UUID", func(r api.Rack) string { return r.Uuid }},
		{"NAME", func(r api.Rack) string { return r.Name }},
		{"STATUS", func(r api.Rack) string { return r.Status }},
		{"LAST SEEN", func(r api.Rack) string { return cellTime(r.LastSeen) }},
		{"VERSION", func(r api.Rack) string { return r.Version }},
		{"REGIONS", func(r api.Rack) string { return cellList(r.RegionEndpoints) }},
	},
}

// Racks create themselves by registering (ironflow rack register); the CLI reads and removes them.
func newRacksCommand() *cobra.Command {
	return racks.command(racks.list(), racks.show(), racks.remove(), newRackSecretCommand(), newRacksTransferCommand(), newRacksRecoverCommand(), newRacksOperationsCommand(), newRacksProxyCommand())
}

// newRackSecretCommand prints the region's rack secret, for `ironflow rack register --secret`.
func newRackSecretCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "secret",
		Short: "Print the secret racks register with (admin only)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			secret, err := regionClient(cmd).RackSecret(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), secret.Secret)
			return nil
		},
	}
}
