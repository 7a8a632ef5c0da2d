package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/ironflow/ironflow/rack"
	"github.com/ironflow/ironflow/rack/httpboot"
	rsyslog "github.com/ironflow/ironflow/rack/syslog"
)

func newRackCommand() *cobra.Command {
	c := &cobra.Command{Use: "rack", Short: "Register or run a rack controller (DHCP, TFTP, HTTP boot next to the machines)"}
	c.AddCommand(newRackRegisterCommand(), newRackServeCommand())
	return c
}

// Flags of the rack commands; each falls back to its environment variable. List flags read
// a comma-separated variable.
var rackFlagEnvs = map[string]string{
	"url":                   "IRONFLOW_RACK_URLS",
	"secret":                "IRONFLOW_RACK_SECRET",
	"name":                  "IRONFLOW_RACK_NAME",
	"state-dir":             "IRONFLOW_RACK_STATE_DIR",
	"dhcp-interface":        "IRONFLOW_DHCP_INTERFACES",
	"dhcp-relay-listen":     "IRONFLOW_DHCP_RELAY_LISTEN",
	"router-advertisements": "IRONFLOW_ROUTER_ADVERTISEMENTS",
	"server-ip":             "IRONFLOW_RACK_SERVER_IP",
	"tftp-listen":           "IRONFLOW_TFTP_LISTEN",
	"dns-listen":            "IRONFLOW_RACK_DNS_LISTEN",
	"http-listen":           "IRONFLOW_HTTP_LISTEN",
	"http-boot-url":         "IRONFLOW_HTTP_BOOT_URL",
	"syslog-listen":         "IRONFLOW_SYSLOG_LISTEN",
	"boot-dir":              "IRONFLOW_BOOT_DIR",
	"region-secrets-file":   "IRONFLOW_RACK_REGION_SECRETS_FILE",
	"pod-ssh-key":           "IRONFLOW_RACK_POD_SSH_KEY",
	"pod-refresh-interval":  "IRONFLOW_RACK_POD_REFRESH_INTERVAL",
	"image-cache-dir":       "IRONFLOW_RACK_IMAGE_CACHE_DIR",
	"image-cache-size":      "IRONFLOW_RACK_IMAGE_CACHE_SIZE",
}

// rackFlag is the flag's value, else its environment variable, else its default.
func rackFlag(cmd *cobra.Command, name string) string {
	return flagOrEnv(cmd, name, rackFlagEnvs[name])
}

// rackListFlag is a repeatable flag's values, else its comma-separated environment variable.
func rackListFlag(cmd *cobra.Command, name string) []string {
	if v, ok := envFallback(cmd, name, rackFlagEnvs[name]); ok {
		var out []string
		for s := range strings.SplitSeq(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	values, _ := cmd.Flags().GetStringArray(name)
	return values
}

// rackEnvHelp ends a rack flag's usage with its environment variable.
func rackEnvHelp(name string) string { return envHelp(rackFlagEnvs[name]) }

func newRackRegisterCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "register --url URL [--url URL...] --secret SECRET",
		Short: "Register this rack with a region and store its identity and token in the state directory",
		Long: "Register this rack with a region. The region URLs are tried in turn; the secret is the\n" +
			"region's rack secret (`ironflow racks secret` on the region). A rack registered before keeps\n" +
			"its UUID. A running `rack serve` uses the new registration after a restart.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := rack.Register(cmd.Context(), rack.RegisterOptions{
				URLs:     rackListFlag(cmd, "url"),
				Secret:   rackFlag(cmd, "secret"),
				Name:     rackFlag(cmd, "name"),
				StateDir: rackFlag(cmd, "state-dir"),
				Version:  version,
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "registered rack %s (%s) with region %s at %s\n", st.Name, st.Uuid, st.Region.Name, strings.Join(st.Endpoints, ", "))
			return nil
		},
	}
	f := c.Flags()
	f.StringArray("url", nil, "region URL; repeat for every region endpoint, preferred first"+rackEnvHelp("url"))
	f.String("secret", "", "the region's rack secret"+rackEnvHelp("secret"))
	f.String("name", "", "rack name (default: the earlier registration's, else the host name)"+rackEnvHelp("name"))
	f.String("state-dir", rack.DefaultStateDir, "state directory"+rackEnvHelp("state-dir"))
	return c
}

func newRackServeCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "serve",
		Short: "Serve DHCP, TFTP, HTTP boot and the rack's worker until interrupted",
		Long: "Serve DHCP (broadcast on --dhcp-interface, relayed on --dhcp-relay-listen), TFTP and HTTP boot\n" +
			"from --boot-dir, receive the machines' syslog for the region (--syslog-listen, UDP and TCP),\n" +
			"proxy the agent and metadata APIs to the region with failover, and, with a\n" +
			"Temporal address, run the rack's worker for transfer-rack. The rack keeps serving with no\n" +
			"region reachable, also after a restart.\n\n" +
			"The region secrets file (YAML: secrets: {REGION: SECRET}) names the rack secrets of the\n" +
			"regions this rack may be transferred to.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := daemonLogger(cmd, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			o, err := rackServeOptions(cmd, logger)
			if err != nil {
				return err
			}
			return rack.Serve(cmd.Context(), o)
		},
	}
	f := c.Flags()
	f.String("state-dir", rack.DefaultStateDir, "state directory"+rackEnvHelp("state-dir"))
	f.StringArray("dhcp-interface", nil, "serve broadcast DHCP on this interface; repeatable"+rackEnvHelp("dhcp-interface"))
	f.Bool("router-advertisements", true, "answer IPv6 router solicitations on the DHCP interfaces with an empty advertisement (no prefix, not a default router), so iPXE does not wait for IPv6; turn off where the link has an IPv6 router"+rackEnvHelp("router-advertisements"))
	f.String("dhcp-relay-listen", "", "ip:port for relayed DHCP requests, e.g. 127.0.0.1:1067"+rackEnvHelp("dhcp-relay-listen"))
	f.String("server-ip", "", "the rack's address clients reach (default: the relay listen IP or the first interface's)"+rackEnvHelp("server-ip"))
	f.String("tftp-listen", ":69", "TFTP address; empty disables TFTP"+rackEnvHelp("tftp-listen"))
	f.StringArray("dns-listen", nil, "ip:port to serve DNS on, UDP and TCP; repeatable; \"none\" disables DNS (default: port 53 on each --dhcp-interface's address)"+rackEnvHelp("dns-listen"))
	f.String("http-listen", httpboot.DefaultAddr, "HTTP boot address; empty disables HTTP boot"+rackEnvHelp("http-listen"))
	f.String("syslog-listen", rsyslog.DefaultAddr, "syslog address (UDP and TCP) of the machines; empty disables syslog"+rackEnvHelp("syslog-listen"))
	f.String("http-boot-url", "", "HTTP boot URL given to clients (default http://SERVER-IP:PORT)"+rackEnvHelp("http-boot-url"))
	f.String("boot-dir", "/var/lib/ironflow/boot", "boot directory served by TFTP and HTTP"+rackEnvHelp("boot-dir"))
	f.String("region-secrets-file", "", "rack secrets of the regions this rack may move to"+rackEnvHelp("region-secrets-file"))
	f.String("pod-ssh-key", "", "private key file the rack logs in with to its qemu+ssh pods (their host keys are recorded on the pods)"+rackEnvHelp("pod-ssh-key"))
	f.Duration("pod-refresh-interval", rack.DefaultPodRefreshInterval, "how often the rack refreshes the facts of its pods; 0 never (on demand only)"+rackEnvHelp("pod-refresh-interval"))
	f.String("image-cache-dir", "", "directory of the rack's cache of the region's OS images (default: images in --state-dir)"+rackEnvHelp("image-cache-dir"))
	f.Int64("image-cache-size", rack.DefaultImageCacheBytes, "bytes the image cache may hold; the least recently used images not being served are evicted"+rackEnvHelp("image-cache-size"))
	addLogFlags(c)
	addTemporalFlags(c)
	// A rack runs its worker only when a Temporal address is given.
	addr := c.PersistentFlags().Lookup(flagTemporalAddress)
	addr.DefValue = ""
	if err := addr.Value.Set(""); err != nil {
		panic(err)
	}
	return c
}

// rackServeOptions reads the serve flags.
func rackServeOptions(cmd *cobra.Command, logger *slog.Logger) (rack.Options, error) {
	o := rack.Options{
		StateDir:        rackFlag(cmd, "state-dir"),
		DHCPInterfaces:  rackListFlag(cmd, "dhcp-interface"),
		DHCPRelayListen: rackFlag(cmd, "dhcp-relay-listen"),
		TFTPListen:      rackFlag(cmd, "tftp-listen"),
		HTTPListen:      rackFlag(cmd, "http-listen"),
		HTTPBootURL:     rackFlag(cmd, "http-boot-url"),
		SyslogListen:    rackFlag(cmd, "syslog-listen"),
		BootDir:         rackFlag(cmd, "boot-dir"),
		DNSListen:       dnsListen(cmd),
		Version:         version,
		Logger:          logger,
	}
	ras, err := strconv.ParseBool(rackFlag(cmd, "router-advertisements"))
	if err != nil {
		return rack.Options{}, fmt.Errorf("--router-advertisements %q: want true or false", rackFlag(cmd, "router-advertisements"))
	}
	o.RouterAdvertisements = ras
	if ip := rackFlag(cmd, "server-ip"); ip != "" {
		a, err := netip.ParseAddr(ip)
		if err != nil || !a.Is4() {
			return rack.Options{}, fmt.Errorf("--server-ip %q is not an IPv4 address", ip)
		}
		o.ServerIP = a
	}
	if temporalFlag(cmd, flagTemporalAddress) != "" {
		if o.Temporal, err = temporalOptions(cmd, logger); err != nil {
			return rack.Options{}, err
		}
		warnClearPayloads(o.Temporal, logger)
	}
	secrets, err := loadRegionSecrets(rackFlag(cmd, "region-secrets-file"))
	if err != nil {
		return rack.Options{}, err
	}
	o.RegionSecrets = secrets
	o.PodSSHKeyFile = rackFlag(cmd, "pod-ssh-key")
	every, err := time.ParseDuration(rackFlag(cmd, "pod-refresh-interval"))
	if err != nil || every < 0 {
		return rack.Options{}, fmt.Errorf("--pod-refresh-interval %q: want a duration such as 5m, or 0", rackFlag(cmd, "pod-refresh-interval"))
	}
	o.PodRefreshInterval = every
	if every == 0 {
		o.PodRefreshInterval = -1 // the rack's "never"
	}
	o.ImageCacheDir = rackFlag(cmd, "image-cache-dir")
	if o.ImageCacheBytes, err = strconv.ParseInt(rackFlag(cmd, "image-cache-size"), 10, 64); err != nil || o.ImageCacheBytes <= 0 {
		return rack.Options{}, fmt.Errorf("--image-cache-size %q: want a positive number of bytes", rackFlag(cmd, "image-cache-size"))
	}
	return o, nil
}

// dnsListen is --dns-listen: nil when neither the flag nor its variable is set (the rack's
// default), empty for "none".
func dnsListen(cmd *cobra.Command) []string {
	values := rackListFlag(cmd, "dns-listen")
	switch {
	case len(values) == 1 && values[0] == "none":
		return []string{}
	case len(values) == 0:
		return nil
	}
	return values
}

// loadRegionSecrets reads `secrets: {REGION: SECRET}`; no file means no secrets.
func loadRegionSecrets(path string) (map[string]string, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("region secrets file: %w", err)
	}
	var f struct {
		Secrets map[string]string `json:"secrets"`
	}
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("region secrets file %s: %w", path, err)
	}
	for name, s := range f.Secrets {
		if strings.TrimSpace(name) == "" || s == "" {
			return nil, errors.New("region secrets file " + path + ": every entry needs a name and a secret")
		}
	}
	return f.Secrets, nil
}
