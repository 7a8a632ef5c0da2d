package main

import (
	"crypto/tls"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	temporallog "go.temporal.io/sdk/log"

	"github.com/ironflow/ironflow/internal/payloadcodec"
)

// Temporal connection flags of the commands that talk to Temporal (worker, machines migrate,
// migrations). Each falls back to Ironflow's variable, then to the Temporal CLI's own
// (temporalScope); the payload keys, which Temporal knows nothing of, to Ironflow's only.
const (
	flagTemporalAddress    = "temporal-address"
	flagNamespace          = "namespace"
	flagTemporalTLS        = "temporal-tls"
	flagTemporalAPIKey     = "temporal-api-key"
	flagPayloadKeys        = "payload-keys"
	defaultTemporalAddress = "127.0.0.1:7233"
	defaultNamespace       = "default"
)

// addTemporalFlags adds the connection flags to c and its subcommands.
func addTemporalFlags(c *cobra.Command) {
	f := temporalScope.on(c.PersistentFlags())
	f.string(new(string), flagTemporalAddress, defaultTemporalAddress, "Temporal frontend host:port")
	f.string(new(string), flagNamespace, defaultNamespace, "Temporal namespace")
	f.bool(new(bool), flagTemporalTLS, false, "connect to Temporal over TLS (implied by an API key)")
	f.string(new(string), flagTemporalAPIKey, "", "Temporal API key, e.g. for Temporal Cloud")
	addPayloadKeysFlag(c.PersistentFlags(), "key FILE (mode 0600, lines id:base64key, the first the current key) encrypting what goes to Temporal; none: payloads in clear text")
}

// addPayloadKeysFlag declares --payload-keys, which the codec endpoint shares with the
// Temporal clients.
func addPayloadKeysFlag(fs *pflag.FlagSet, usage string) {
	ironflowScope.on(fs).string(new(string), flagPayloadKeys, "", usage)
}

// temporalClient is a Temporal client with its data converter, which decodes the payloads the
// SDK hands over as they are stored (histories, the memos of descriptions).
type temporalClient struct {
	client.Client
	dc converter.DataConverter
}

// dialTemporal connects to the Temporal frontend the flags name.
func dialTemporal(cmd *cobra.Command, logger *slog.Logger) (*temporalClient, error) {
	opts, err := temporalOptions(cmd, logger)
	if err != nil {
		return nil, err
	}
	return dialWith(cmd, opts)
}

// dialWith connects to Temporal with opts.
func dialWith(cmd *cobra.Command, opts client.Options) (*temporalClient, error) {
	c, err := client.DialContext(cmd.Context(), opts)
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s (namespace %s): %w", opts.HostPort, opts.Namespace, err)
	}
	dc := opts.DataConverter
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	return &temporalClient{Client: c, dc: dc}, nil
}

// temporalOptions are the client options the flags describe. The SDK logs through logger:
// its default logger would write to stdout, which `$(ironflow ...)` captures.
func temporalOptions(cmd *cobra.Command, logger *slog.Logger) (client.Options, error) {
	opts := client.Options{
		HostPort:  flagValue(cmd, flagTemporalAddress),
		Namespace: flagValue(cmd, flagNamespace),
		Logger:    temporallog.NewStructuredLogger(logger),
	}
	useTLS, _ := cmd.Flags().GetBool(flagTemporalTLS)
	if key := flagValue(cmd, flagTemporalAPIKey); key != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(key)
		useTLS = true // an API key must not cross the network in clear text
	}
	if useTLS {
		opts.ConnectionOptions.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	codec, err := payloadCodec(cmd)
	if codec != nil {
		opts.DataConverter = codec.DataConverter()
	}
	return opts, err
}

// payloadCodec is the codec of the key file the flags name; nil without one.
func payloadCodec(cmd *cobra.Command) (*payloadcodec.Codec, error) {
	path := flagValue(cmd, flagPayloadKeys)
	if path == "" {
		return nil, nil
	}
	codec, err := payloadcodec.LoadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagOrigin(cmd, flagPayloadKeys), err)
	}
	return codec, nil
}

// warnClearPayloads tells a daemon's operator that, without a key file, the grants its
// workflows carry are readable by anyone who can read the Temporal namespace.
func warnClearPayloads(opts client.Options, logger *slog.Logger) {
	if opts.DataConverter == nil {
		logger.Warn("no --" + flagPayloadKeys + ": workflow payloads (grants included) go to Temporal in clear text")
	}
}

// cliLogger is the logger of short-lived CLI commands: warnings and errors only, on stderr.
func cliLogger(cmd *cobra.Command) *slog.Logger {
	return slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}
