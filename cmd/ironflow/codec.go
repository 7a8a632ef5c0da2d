package main

import (
	"fmt"
	"net"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ironflow/ironflow/internal/payloadcodec"
)

const defaultCodecListen = "127.0.0.1:8234"

// codecServeFlags are the flags of codec serve but the payload keys and the -E region it
// shares with other commands.
type codecServeFlags struct {
	Listen     string
	CORSOrigin string
}

func (f *codecServeFlags) declare(fs *pflag.FlagSet) {
	e := codecScope.on(fs)
	e.string(&f.Listen, "listen", defaultCodecListen, "host:port to serve on")
	e.string(&f.CORSOrigin, "cors-origin", "", "comma-separated web origins whose pages may call the endpoint, e.g. the Temporal UI's http://127.0.0.1:8233")
}

func newCodecCommand() *cobra.Command {
	c := &cobra.Command{Use: "codec", Short: "The codec endpoint that shows encrypted Temporal payloads to admins"}
	c.AddCommand(newCodecServeCommand())
	return c
}

func newCodecServeCommand() *cobra.Command {
	var flags codecServeFlags
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
				return fmt.Errorf("--%s (env %s) is required: the codec endpoint decodes with those keys", flagPayloadKeys, ironflowScope.name(flagPayloadKeys))
			}
			var origins []string
			for o := range strings.SplitSeq(flags.CORSOrigin, ",") {
				if o = strings.TrimSpace(o); o != "" {
					origins = append(origins, o)
				}
			}
			ln, err := net.Listen("tcp", flags.Listen)
			if err != nil {
				return fmt.Errorf("codec endpoint: %w", err)
			}
			region := flagValue(cmd, flagEndpoint)
			logger.Info("codec endpoint serving", "listen", ln.Addr().String(), "region", region, "key", codec.CurrentKeyID())
			e := &payloadcodec.Endpoint{Codec: codec, Region: region, AllowOrigins: origins, Logger: logger}
			return e.Serve(cmd.Context(), ln)
		},
	}
	addPayloadKeysFlag(c.Flags(), "key FILE of the workers (mode 0600)")
	flags.declare(c.Flags())
	addLogFlags(c)
	return c
}
