package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/region/api"
	regiondns "github.com/ironflow/ironflow/region/dns"
	"github.com/ironflow/ironflow/region/server"
	"github.com/ironflow/ironflow/region/ui/uitemporal"
)

func newRegionCommand() *cobra.Command {
	c := &cobra.Command{Use: "region", Short: "Run or inspect a region controller"}
	c.AddCommand(newRegionServeCommand(), newRegionInfoCommand())
	return c
}

// regionServeFlags are the flags of region serve.
type regionServeFlags struct {
	DatabaseURL, Listen, Name, PublicURL   string
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	MaxHeaderBytes, MaxConns               int
	EventsMaxAge, SyslogMaxAge             time.Duration
	EventsMaxCount, SyslogMaxCount         int
	AdminToken, RackSecret                 string
	DNSListen, DNSTransferFrom             string
	ImagesDir                              string
	ImagesMaxBytes                         int64
	UI, UITransfers                        bool
	TemporalUI                             string
}

func (f *regionServeFlags) declare(fs *pflag.FlagSet) {
	e := ironflowScope.on(fs)
	e.string(&f.DatabaseURL, "database-url", "", "PostgreSQL connection string")
	e.string(&f.Listen, "listen", ":5240", "address of the HTTP API")
	// IRONFLOW_REGION_NAME: a bare IRONFLOW_NAME would not say whose name it is.
	regionScope.on(fs).string(&f.Name, "name", "", "region name (default: the host name)")
	e.string(&f.PublicURL, "public-url", "", "URL racks, clients and other regions reach this region at")
	e.duration(&f.ReadTimeout, "read-timeout", server.DefaultLimits.ReadTimeout, "time to read a whole request (migration imports get 10m once their ticket is verified)")
	e.duration(&f.WriteTimeout, "write-timeout", server.DefaultLimits.WriteTimeout, "time to write an answer (agent long polls and exports extend theirs)")
	e.duration(&f.IdleTimeout, "idle-timeout", server.DefaultLimits.IdleTimeout, "time a keep-alive connection may idle")
	e.int(&f.MaxHeaderBytes, "max-header-bytes", server.DefaultLimits.MaxHeaderBytes, "largest request header")
	e.int(&f.MaxConns, "max-conns", server.DefaultLimits.MaxConns, "connections served at once")
	e.duration(&f.EventsMaxAge, "events-max-age", 2160*time.Hour, "delete audit events older than this (0: keep)")
	e.int(&f.EventsMaxCount, "events-max-count", 1000000, "keep at most this many audit events (0: no bound)")
	e.duration(&f.SyslogMaxAge, "syslog-max-age", 720*time.Hour, "delete machines' syslog messages stored longer ago than this (0: keep)")
	e.int(&f.SyslogMaxCount, "syslog-max-count", 10000000, "keep at most this many syslog messages, of all machines (0: no bound)")
	e.string(&f.AdminToken, "admin-token", "", "admin token to install at first start (default: mint one and print it once)")
	e.string(&f.RackSecret, "rack-secret", "", "secret racks register with (default: mint one, shown by: ironflow racks secret)")
	e.string(&f.DNSListen, "dns-listen", "", "address (host:port) to answer DNS for the region's zones on, UDP and TCP (default: none; racks query over HTTP)")
	e.string(&f.ImagesDir, "images-dir", "", "directory of the region's OS images, one file per SHA-256 (shared by every process of the region; default: none, uploads refused)")
	e.int64(&f.ImagesMaxBytes, "images-max-size", server.DefaultImageMaxBytes, "largest image an upload may carry, in bytes")
	e.bool(&f.UI, "ui", true, "serve the web UI at / on the API's address (false: the API only)")
	e.bool(&f.UITransfers, "ui-transfers", false, "let the web UI start, pause and resume rack transfers through Temporal (the --temporal-address, --namespace and --payload-keys of the workers)")
	e.string(&f.TemporalUI, "temporal-ui", "", "URL of the Temporal web UI, which the web UI links moves to (default: no links)")
	e.string(&f.DNSTransferFrom, "dns-transfer-from", "", "comma-separated networks (CIDR) or addresses that may transfer zones (AXFR, over TCP only) from --dns-listen; \"none\": nobody (default: loopback and the addresses racks heartbeat from)")
}

func newRegionServeCommand() *cobra.Command {
	var flags regionServeFlags
	c := &cobra.Command{
		Use:   "serve",
		Short: "Serve the region API on top of PostgreSQL until interrupted",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := flags.config(cmd)
			if err != nil {
				return err
			}
			if cfg.DatabaseURL == "" {
				return fmt.Errorf("no database: give --database-url or set %s", ironflowScope.name("database-url"))
			}
			if cfg.Logger, err = daemonLogger(cmd, cmd.ErrOrStderr()); err != nil {
				return err
			}
			cfg.AdminTokenOut = cmd.OutOrStdout() // the token, printed once, is the command's output
			if flags.UITransfers && cfg.UI {
				// Lazy: the region serves while Temporal is down; the rack page says so.
				opts, err := temporalOptions(cmd, cfg.Logger)
				if err != nil {
					return err
				}
				tc, err := client.NewLazyClient(opts)
				if err != nil {
					return fmt.Errorf("Temporal client for the web UI: %w", err)
				}
				defer tc.Close()
				cfg.UITransfers = uitemporal.New(tc)
			}
			return server.Run(cmd.Context(), cfg)
		},
	}
	flags.declare(c.Flags())
	addTemporalFlags(c)
	addLogFlags(c)
	return c
}

// config checks the serve flags: no limit, age or count is negative.
func (f *regionServeFlags) config(cmd *cobra.Command) (server.Config, error) {
	var errs []error
	for _, c := range []struct {
		name string
		v    int64
	}{
		{"read-timeout", int64(f.ReadTimeout)}, {"write-timeout", int64(f.WriteTimeout)}, {"idle-timeout", int64(f.IdleTimeout)},
		{"max-header-bytes", int64(f.MaxHeaderBytes)}, {"max-conns", int64(f.MaxConns)},
		{"events-max-age", int64(f.EventsMaxAge)}, {"events-max-count", int64(f.EventsMaxCount)},
		{"syslog-max-age", int64(f.SyslogMaxAge)}, {"syslog-max-count", int64(f.SyslogMaxCount)},
		{"images-max-size", f.ImagesMaxBytes},
	} {
		if c.v < 0 {
			errs = append(errs, fmt.Errorf("%s: %s is negative", flagOrigin(cmd, c.name), cmd.Flags().Lookup(c.name).Value))
		}
	}
	cfg := server.Config{
		DatabaseURL: f.DatabaseURL,
		Listen:      f.Listen,
		Name:        f.Name,
		PublicURL:   f.PublicURL,
		AdminToken:  f.AdminToken,
		RackSecret:  f.RackSecret,
		DNSListen:   f.DNSListen,
		ImagesDir:   f.ImagesDir,
		Version:     version,
		Limits: server.Limits{
			ReadTimeout:    f.ReadTimeout,
			WriteTimeout:   f.WriteTimeout,
			IdleTimeout:    f.IdleTimeout,
			MaxHeaderBytes: f.MaxHeaderBytes,
			MaxConns:       f.MaxConns,
		},
		Retention:       server.Retention{MaxAge: f.EventsMaxAge, MaxCount: f.EventsMaxCount},
		SyslogRetention: server.Retention{MaxAge: f.SyslogMaxAge, MaxCount: f.SyslogMaxCount},
		ImageMaxBytes:   f.ImagesMaxBytes,
	}
	transferFrom, err := regiondns.ParseTransferFrom(f.DNSTransferFrom)
	if err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", flagOrigin(cmd, "dns-transfer-from"), err))
	}
	cfg.DNSTransferFrom = transferFrom
	cfg.UI, cfg.TemporalUI = f.UI, f.TemporalUI
	cfg.SecureCookies = strings.HasPrefix(cfg.PublicURL, "https://")
	return cfg, errors.Join(errs...)
}

var infoColumns = []column[api.Info]{
	{"NAME", func(i api.Info) string { return i.Name }},
	{"UUID", func(i api.Info) string { return i.Uuid }},
	{"URL", func(i api.Info) string { return i.URL }},
	{"VERSION", func(i api.Info) string { return i.Version }},
	{"ENDPOINTS", func(i api.Info) string { return cellList(i.Endpoints) }},
}

func newRegionInfoCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "info",
		Short: "Show the region's name, UUID, URL and the endpoints of its cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info, err := regionClient(cmd).Info(cmd.Context())
			if err != nil {
				return err
			}
			return render(cmd, info, []api.Info{info}, infoColumns)
		},
	}
}
