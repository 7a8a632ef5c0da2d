package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/region/api"
)

var proxyColumns = []column[api.RackProxy]{
	{"ENABLED", func(p api.RackProxy) string { return strconv.FormatBool(!p.Disabled) }},
	{"PARENT", func(p api.RackProxy) string { return cellOr(p.Parent, "direct") }},
	{"CONNECT PORTS", func(p api.RackProxy) string { return cellOr(fmt.Sprint(p.ConnectPorts), "[443]", "[]") }},
	{"CACHE BYTES", func(p api.RackProxy) string {
		switch {
		case p.CacheBytes == 0:
			return strconv.FormatInt(api.DefaultProxyCacheBytes, 10) + " (default)"
		case p.CacheBytes < 0:
			return "none"
		}
		return strconv.FormatInt(p.CacheBytes, 10)
	}},
}

// cellOr is v, or def when v is empty or one of the empty spellings.
func cellOr(v, def string, empty ...string) string {
	for _, e := range append(empty, "") {
		if v == e {
			return def
		}
	}
	return v
}

// newRacksProxyCommand shows and changes the racks' HTTP proxy for machines.
func newRacksProxyCommand() *cobra.Command {
	c := &cobra.Command{Use: "proxy", Short: "Show or change the HTTP proxy every rack serves its machines on port 8000"}
	show := &cobra.Command{
		Use:   "show",
		Short: "Show the racks' proxy settings",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := regionClient(cmd).ProxySettings(cmd.Context())
			if err != nil {
				return err
			}
			return render(cmd, p, []api.RackProxy{p}, proxyColumns)
		},
	}
	set := &cobra.Command{
		Use:   "set",
		Short: "Change the racks' proxy settings (the flags given; the others stay)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rc := regionClient(cmd)
			p, err := rc.ProxySettings(cmd.Context())
			if err != nil {
				return err
			}
			f := cmd.Flags()
			if f.Changed("enabled") {
				enabled, _ := f.GetBool("enabled")
				p.Disabled = !enabled
			}
			if f.Changed("parent") {
				p.Parent, _ = f.GetString("parent")
			}
			if f.Changed("connect-port") {
				p.ConnectPorts, _ = f.GetIntSlice("connect-port")
			}
			if f.Changed("cache-bytes") {
				p.CacheBytes, _ = f.GetInt64("cache-bytes")
			}
			if p, err = rc.SetProxySettings(cmd.Context(), p); err != nil {
				return err
			}
			return render(cmd, p, []api.RackProxy{p}, proxyColumns)
		},
	}
	set.Flags().Bool("enabled", true, "serve the proxy (false: every request is answered 503)")
	set.Flags().String("parent", "", "site proxy http://host:port every request goes through; \"\" connects directly")
	set.Flags().IntSlice("connect-port", nil, "ports CONNECT may reach (default 443); repeatable or comma-separated")
	set.Flags().Int64("cache-bytes", 0, "each rack's disk cache: 0 the default (10 GiB), -1 none")
	c.AddCommand(show, set)
	return c
}
