package main

import (
	"os"
	"strings"

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
	f.StringP(flagEndpoint, "E", defaultEndpoint, "region API URL"+envHelp(envEndpoint))
	f.String(flagToken, "", "API token"+envHelp(envToken))
	format := formatJSON
	f.VarP(&format, flagOutput, "o", "output format: json, yaml or table")
}

// flagOrEnv is how every command reads a flag that has environment fallbacks: the flag's
// value when given on the command line, else the first of envs that is set, else the flag's
// default. Environment values are read here rather than used as flag defaults so that
// secrets never show up in --help.
func flagOrEnv(cmd *cobra.Command, name string, envs ...string) string {
	if v, ok := envFallback(cmd, name, envs...); ok {
		return v
	}
	return cmd.Flags().Lookup(name).Value.String()
}

// envFallback is the first of envs that is set, when the flag was not given on the command
// line.
func envFallback(cmd *cobra.Command, name string, envs ...string) (string, bool) {
	if cmd.Flags().Lookup(name).Changed {
		return "", false
	}
	for _, env := range envs {
		if v, ok := os.LookupEnv(env); ok {
			return v, true
		}
	}
	return "", false
}

// envHelp ends a flag's usage with the environment variables it falls back to.
func envHelp(envs ...string) string { return " (env " + strings.Join(envs, ", ") + ")" }

// regionClient is the API client the global flags describe.
func regionClient(cmd *cobra.Command) *client.Client {
	return client.New(flagOrEnv(cmd, flagEndpoint, envEndpoint), flagOrEnv(cmd, flagToken, envToken))
}
