package main

import (
	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/agent"
)

const defaultAgentConfig = "/etc/ironflow/agent.yaml"

func newAgentCommand() *cobra.Command {
	var configFile string
	c := &cobra.Command{
		Use:   "agent",
		Short: "Run the machine agent: take jobs from the region, run them, follow migrations",
		Long: "Run the machine agent until interrupted. It checks in with the first reachable endpoint of\n" +
			"its config file (YAML: endpoints, machine, secret, pollWait, jobTimeout), long-polls for\n" +
			"jobs, runs their scripts with /bin/sh -c and streams their output. When its machine has\n" +
			"migrated it follows the region's redirect and rewrites the config file.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := daemonLogger(cmd, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			// A missing or invalid config fails here, before anything runs.
			a, err := agent.New(configFile, agent.Options{Version: version, Logger: logger})
			if err != nil {
				return err
			}
			return a.Serve(cmd.Context())
		},
	}
	agentScope.on(c.Flags()).string(&configFile, "config", defaultAgentConfig, "agent config file")
	addLogFlags(c)
	c.AddCommand(newAgentEnlistCommand())
	return c
}
