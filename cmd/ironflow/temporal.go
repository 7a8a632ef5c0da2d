package main

import (
	"crypto/tls"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	temporallog "go.temporal.io/sdk/log"
)

// Temporal connection flags of the commands that talk to Temporal (worker, machines migrate,
// migrations). Each falls back to Ironflow's variable, then to the Temporal CLI's own.
const (
	flagTemporalAddress    = "temporal-address"
	flagNamespace          = "namespace"
	flagTemporalTLS        = "temporal-tls"
	flagTemporalAPIKey     = "temporal-api-key"
	defaultTemporalAddress = "127.0.0.1:7233"
	defaultNamespace       = "default"
)

var temporalFlagEnvs = map[string][]string{
	flagTemporalAddress: {"IRONFLOW_TEMPORAL_ADDRESS", "TEMPORAL_ADDRESS"},
	flagNamespace:       {"IRONFLOW_TEMPORAL_NAMESPACE", "TEMPORAL_NAMESPACE"},
	flagTemporalAPIKey:  {"IRONFLOW_TEMPORAL_API_KEY", "TEMPORAL_API_KEY"},
}

// addTemporalFlags adds the connection flags to c and its subcommands.
func addTemporalFlags(c *cobra.Command) {
	f := c.PersistentFlags()
	f.String(flagTemporalAddress, defaultTemporalAddress, "Temporal frontend host:port"+envHelp(temporalFlagEnvs[flagTemporalAddress]...))
	f.String(flagNamespace, defaultNamespace, "Temporal namespace"+envHelp(temporalFlagEnvs[flagNamespace]...))
	f.Bool(flagTemporalTLS, false, "connect to Temporal over TLS (implied by an API key)")
	f.String(flagTemporalAPIKey, "", "Temporal API key, e.g. for Temporal Cloud"+envHelp(temporalFlagEnvs[flagTemporalAPIKey]...))
}

// temporalFlag is the flag's value, else its environment variables, else its default.
func temporalFlag(cmd *cobra.Command, name string) string {
	return flagOrEnv(cmd, name, temporalFlagEnvs[name]...)
}

// dialTemporal connects to the Temporal frontend the flags name.
func dialTemporal(cmd *cobra.Command, logger *slog.Logger) (client.Client, error) {
	opts := temporalOptions(cmd, logger)
	c, err := client.DialContext(cmd.Context(), opts)
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s (namespace %s): %w", opts.HostPort, opts.Namespace, err)
	}
	return c, nil
}

// temporalOptions are the client options the flags describe. The SDK logs through logger:
// its default logger would write to stdout, which `$(ironflow ...)` captures.
func temporalOptions(cmd *cobra.Command, logger *slog.Logger) client.Options {
	opts := client.Options{
		HostPort:  temporalFlag(cmd, flagTemporalAddress),
		Namespace: temporalFlag(cmd, flagNamespace),
		Logger:    temporallog.NewStructuredLogger(logger),
	}
	useTLS, _ := cmd.Flags().GetBool(flagTemporalTLS)
	if key := temporalFlag(cmd, flagTemporalAPIKey); key != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(key)
		useTLS = true // an API key must not cross the network in clear text
	}
	if useTLS {
		opts.ConnectionOptions.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return opts
}

// cliLogger is the logger of short-lived CLI commands: warnings and errors only, on stderr.
func cliLogger(cmd *cobra.Command) *slog.Logger {
	return slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}
