package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
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

// serveFlags are the flags of region serve with the environment variables they fall back to.
var serveFlags = []struct{ name, env, def, usage string }{
	{"database-url", "IRONFLOW_DATABASE_URL", "", "PostgreSQL connection string"},
	{"listen", "IRONFLOW_LISTEN", ":5240", "address of the HTTP API"},
	{"name", "IRONFLOW_REGION_NAME", "", "region name (default: the host name)"},
	{"public-url", "IRONFLOW_PUBLIC_URL", "", "URL racks, clients and other regions reach this region at"},
	{"read-timeout", "IRONFLOW_READ_TIMEOUT", server.DefaultLimits.ReadTimeout.String(), "time to read a whole request (migration imports get 10m once their ticket is verified)"},
	{"write-timeout", "IRONFLOW_WRITE_TIMEOUT", server.DefaultLimits.WriteTimeout.String(), "time to write an answer (agent long polls and exports extend theirs)"},
	{"idle-timeout", "IRONFLOW_IDLE_TIMEOUT", server.DefaultLimits.IdleTimeout.String(), "time a keep-alive connection may idle"},
	{"max-header-bytes", "IRONFLOW_MAX_HEADER_BYTES", strconv.Itoa(server.DefaultLimits.MaxHeaderBytes), "largest request header"},
	{"max-conns", "IRONFLOW_MAX_CONNS", strconv.Itoa(server.DefaultLimits.MaxConns), "connections served at once"},
	{"events-max-age", "IRONFLOW_EVENTS_MAX_AGE", "2160h", "delete audit events older than this (0: keep)"},
	{"events-max-count", "IRONFLOW_EVENTS_MAX_COUNT", "1000000", "keep at most this many audit events (0: no bound)"},
	{"syslog-max-age", "IRONFLOW_SYSLOG_MAX_AGE", "720h", "delete machines' syslog messages stored longer ago than this (0: keep)"},
	{"syslog-max-count", "IRONFLOW_SYSLOG_MAX_COUNT", "10000000", "keep at most this many syslog messages, of all machines (0: no bound)"},
	{"admin-token", "IRONFLOW_ADMIN_TOKEN", "", "admin token to install at first start (default: mint one and print it once)"},
	{"rack-secret", "IRONFLOW_RACK_SECRET", "", "secret racks register with (default: mint one, shown by: ironflow racks secret)"},
	{"dns-listen", "IRONFLOW_DNS_LISTEN", "", "address (host:port) to answer DNS for the region's zones on, UDP and TCP (default: none; racks query over HTTP)"},
	{"ui", "IRONFLOW_UI", "true", "serve the web UI at / on the API's address (false: the API only)"},
	{"ui-transfers", "IRONFLOW_UI_TRANSFERS", "false", "let the web UI start, pause and resume rack transfers through Temporal (the --temporal-address, --namespace and --payload-keys of the workers)"},
	{"temporal-ui", "IRONFLOW_TEMPORAL_UI", "", "URL of the Temporal web UI, which the web UI links moves to (default: no links)"},
	{"dns-transfer-from", "IRONFLOW_DNS_TRANSFER_FROM", "", "comma-separated networks (CIDR) or addresses that may transfer zones (AXFR, over TCP only) from --dns-listen; \"none\": nobody (default: loopback and the addresses racks heartbeat from)"},
}

func newRegionServeCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "serve",
		Short: "Serve the region API on top of PostgreSQL until interrupted",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := serveConfig(cmd)
			if err != nil {
				return err
			}
			if cfg.DatabaseURL == "" {
				return errors.New("no database: give --database-url or set IRONFLOW_DATABASE_URL")
			}
			if cfg.Logger, err = daemonLogger(cmd, cmd.ErrOrStderr()); err != nil {
				return err
			}
			cfg.AdminTokenOut = cmd.OutOrStdout() // the token, printed once, is the command's output
			transfers, err := strconv.ParseBool(flagOrEnv(cmd, "ui-transfers", "IRONFLOW_UI_TRANSFERS"))
			if err != nil {
				return fmt.Errorf("--ui-transfers: %w", err)
			}
			if transfers && cfg.UI {
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
	addTemporalFlags(c)
	for _, f := range serveFlags {
		c.Flags().String(f.name, f.def, f.usage+envHelp(f.env))
	}
	addLogFlags(c)
	return c
}

// serveConfig reads the serve flags, each falling back to its environment variable.
func serveConfig(cmd *cobra.Command) (server.Config, error) {
	value := make(map[string]string, len(serveFlags))
	for _, f := range serveFlags {
		value[f.name] = flagOrEnv(cmd, f.name, f.env)
	}
	var errs []error
	duration := func(name string) time.Duration {
		d, err := time.ParseDuration(value[name])
		if err != nil || d < 0 {
			errs = append(errs, fmt.Errorf("--%s %q is not a non-negative duration", name, value[name]))
		}
		return d
	}
	count := func(name string) int {
		n, err := strconv.Atoi(value[name])
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("--%s %q is not a non-negative integer", name, value[name]))
		}
		return n
	}
	cfg := server.Config{
		DatabaseURL: value["database-url"],
		Listen:      value["listen"],
		Name:        value["name"],
		PublicURL:   value["public-url"],
		AdminToken:  value["admin-token"],
		RackSecret:  value["rack-secret"],
		DNSListen:   value["dns-listen"],
		Version:     version,
		Limits: server.Limits{
			ReadTimeout:    duration("read-timeout"),
			WriteTimeout:   duration("write-timeout"),
			IdleTimeout:    duration("idle-timeout"),
			MaxHeaderBytes: count("max-header-bytes"),
			MaxConns:       count("max-conns"),
		},
		Retention:       server.Retention{MaxAge: duration("events-max-age"), MaxCount: count("events-max-count")},
		SyslogRetention: server.Retention{MaxAge: duration("syslog-max-age"), MaxCount: count("syslog-max-count")},
	}
	transferFrom, err := regiondns.ParseTransferFrom(value["dns-transfer-from"])
	if err != nil {
		errs = append(errs, fmt.Errorf("--dns-transfer-from: %w", err))
	}
	cfg.DNSTransferFrom = transferFrom
	if cfg.UI, err = strconv.ParseBool(value["ui"]); err != nil {
		errs = append(errs, fmt.Errorf("--ui %q is not true or false", value["ui"]))
	}
	cfg.TemporalUI = value["temporal-ui"]
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
