package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/region/client"
)

// Global flags of every API command.
const (
	flagEndpoint    = "endpoint"
	flagToken       = "token"
	flagOutput      = "output"
	envEndpoint     = "IRONFLOW_ENDPOINT"
	envToken        = "IRONFLOW_TOKEN"
	defaultEndpoint = "http://127.0.0.1:5240"
)

func addGlobalFlags(root *cobra.Command) {
	f := root.PersistentFlags()
	f.StringP(flagEndpoint, "E", defaultEndpoint, "region API URL (env "+envEndpoint+")")
	f.String(flagToken, "", "API token (env "+envToken+")")
	format := formatJSON
	f.VarP(&format, flagOutput, "o", "output format: json, yaml or table")
}

// flagOrEnv returns the flag's value when given on the command line, else the environment
// variable when set, else the flag's default. Environment values are read here rather than
// used as flag defaults so that secrets never show up in --help.
func flagOrEnv(cmd *cobra.Command, name, env string) string {
	f := cmd.Flags().Lookup(name)
	if f.Changed {
		return f.Value.String()
	}
	if v, ok := os.LookupEnv(env); ok {
		return v
	}
	return f.Value.String()
}

// regionClient is the API client the global flags describe.
func regionClient(cmd *cobra.Command) *client.Client {
	return client.New(flagOrEnv(cmd, flagEndpoint, envEndpoint), flagOrEnv(cmd, flagToken, envToken))
}
