package main

import (
	"fmt"
	"net"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/internal/payloadcodec"
)

const (
	flagCodecListen     = "listen"
	envCodecListen      = "IRONFLOW_CODEC_LISTEN"
	defaultCodecListen  = "127.0.0.1:8234"
	flagCodecCORSOrigin = "cors-origin"
	envCodecCORSOrigin  = "IRONFLOW_CODEC_CORS_ORIGIN"
)

func newCodecCommand() *cobra.Command {
	c := &cobra.Command{Use: "codec", Short: "The codec endpoint that shows encrypted Temporal payloads to admins"}
	c.AddCommand(newCodecServeCommand())
	return c
}

func newCodecServeCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "serve",
		Short: "Serve Temporal's remote codec protocol (POST /encode, /decode) to admins of the -E region",
		Long: "Serve the payload keys' codec to the Temporal web UI (its codec endpoint setting) and the\n" +
			"Temporal CLI (--codec-endpoint URL --codec-auth \"Bearer TOKEN\"). Each request's bearer token is\n" +
			"checked with the -E region (whoami): admin tokens are served, any other role gets 403.",
		Example: `  ironflow codec serve --payload-keys /etc/ironflow/payload.keys -E https://region-a:5240 --cors-origin http://127.0.0.1:8233
  temporal workflow show -w migrate-machine/UUID --codec-endpoint http://127.0.0.1:8234 --codec-auth "Bearer $IRONFLOW_TOKEN"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := daemonLogger(cmd, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			codec, err := payloadCodec(cmd)
			if err != nil {
				return err
			}
			if codec == nil {
				return fmt.Errorf("--%s (env %s) is required: the codec endpoint decodes with those keys", flagPayloadKeys, strings.Join(temporalFlagEnvs[flagPayloadKeys], ", "))
			}
			var origins []string
			for o := range strings.SplitSeq(flagOrEnv(cmd, flagCodecCORSOrigin, envCodecCORSOrigin), ",") {
				if o = strings.TrimSpace(o); o != "" {
					origins = append(origins, o)
				}
			}
			ln, err := net.Listen("tcp", flagOrEnv(cmd, flagCodecListen, envCodecListen))
			if err != nil {
				return fmt.Errorf("codec endpoint: %w", err)
			}
			region := flagOrEnv(cmd, flagEndpoint, envEndpoint)
			logger.Info("codec endpoint serving", "listen", ln.Addr().String(), "region", region, "key", codec.CurrentKeyID())
			e := &payloadcodec.Endpoint{Codec: codec, Region: region, AllowOrigins: origins, Logger: logger}
			return e.Serve(cmd.Context(), ln)
		},
	}
	f := c.Flags()
	f.String(flagPayloadKeys, "", "key FILE of the workers (mode 0600)"+envHelp(temporalFlagEnvs[flagPayloadKeys]...))
	f.String(flagCodecListen, defaultCodecListen, "host:port to serve on"+envHelp(envCodecListen))
	f.String(flagCodecCORSOrigin, "", "comma-separated web origins whose pages may call the endpoint, e.g. the Temporal UI's http://127.0.0.1:8233"+envHelp(envCodecCORSOrigin))
	addLogFlags(c)
	return c
}
