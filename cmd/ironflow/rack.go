package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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

// rackRegisterFlags are the flags of rack register.
type rackRegisterFlags struct {
	URLs                   []string
	Secret, Name, StateDir string
}

func (f *rackRegisterFlags) declare(fs *pflag.FlagSet) {
	e := rackScope.on(fs)
	e.stringList(&f.URLs, "url", "region URL; repeat for every region endpoint, preferred first").formerly("IRONFLOW_RACK_URLS")
	e.string(&f.Secret, "secret", "", "the region's rack secret")
	e.string(&f.Name, "name", "", "rack name (default: the earlier registration's, else the host name)")
	e.string(&f.StateDir, "state-dir", rack.DefaultStateDir, "state directory")
}

// rackServeFlags are the flags of rack serve, besides the Temporal and log flags. The
// variables of some were named without the rack's IRONFLOW_RACK_ before, as the region's
// are: those names are still read, with a warning.
type rackServeFlags struct {
	StateDir             string
	DHCPInterfaces       []string
	RouterAdvertisements bool
	DHCPRelayListen      string
	ServerIP             string
	TFTPListen           string
	DNSListen            []string
	ProxyListen          []string
	HTTPListen           string
	SyslogListen         string
	HTTPBootURL          string
	BootDir              string
	RegionSecretsFile    string
	PodSSHKey            string
	PodRefreshInterval   time.Duration
	ImageCacheDir        string
	ImageCacheBytes      int64
}

func (f *rackServeFlags) declare(fs *pflag.FlagSet) {
	e := rackScope.on(fs)
	e.string(&f.StateDir, "state-dir", rack.DefaultStateDir, "state directory")
	e.stringList(&f.DHCPInterfaces, "dhcp-interface", "serve broadcast DHCP on this interface; repeatable").formerly("IRONFLOW_DHCP_INTERFACES")
	e.bool(&f.RouterAdvertisements, "router-advertisements", true, "answer IPv6 router solicitations on the DHCP interfaces with an empty advertisement (no prefix, not a default router), so iPXE does not wait for IPv6; turn off where the link has an IPv6 router").formerly("IRONFLOW_ROUTER_ADVERTISEMENTS")
	e.string(&f.DHCPRelayListen, "dhcp-relay-listen", "", "ip:port for relayed DHCP requests, e.g. 127.0.0.1:1067").formerly("IRONFLOW_DHCP_RELAY_LISTEN")
	e.string(&f.ServerIP, "server-ip", "", "the rack's address clients reach (default: the relay listen IP or the first interface's)")
	e.string(&f.TFTPListen, "tftp-listen", ":69", "TFTP address; empty disables TFTP").formerly("IRONFLOW_TFTP_LISTEN")
	e.stringList(&f.DNSListen, "dns-listen", "ip:port to serve DNS on, UDP and TCP; repeatable; \"none\" disables DNS (default: port 53 on each --dhcp-interface's address)")
	e.stringList(&f.ProxyListen, "proxy-listen", "ip:port of the HTTP proxy for machines (GET/HEAD, CONNECT to the region's allowed ports, a disk cache); repeatable; \"none\" disables it (default: port 8000 on each --dhcp-interface's address)")
	e.string(&f.HTTPListen, "http-listen", httpboot.DefaultAddr, "HTTP boot address; empty disables HTTP boot").formerly("IRONFLOW_HTTP_LISTEN")
	e.string(&f.SyslogListen, "syslog-listen", rsyslog.DefaultAddr, "syslog address (UDP and TCP) of the machines; empty disables syslog").formerly("IRONFLOW_SYSLOG_LISTEN")
	e.string(&f.HTTPBootURL, "http-boot-url", "", "HTTP boot URL given to clients (default http://SERVER-IP:PORT)").formerly("IRONFLOW_HTTP_BOOT_URL")
	e.string(&f.BootDir, "boot-dir", "/var/lib/ironflow/boot", "boot directory served by TFTP and HTTP").formerly("IRONFLOW_BOOT_DIR")
	e.string(&f.RegionSecretsFile, "region-secrets-file", "", "rack secrets of the regions this rack may move to")
	e.string(&f.PodSSHKey, "pod-ssh-key", "", "private key file the rack logs in with to its qemu+ssh pods (their host keys are recorded on the pods)")
	e.duration(&f.PodRefreshInterval, "pod-refresh-interval", rack.DefaultPodRefreshInterval, "how often the rack refreshes the facts of its pods; 0 never (on demand only)")
	e.string(&f.ImageCacheDir, "image-cache-dir", "", "directory of the rack's cache of the region's OS images (default: images in --state-dir)")
	e.int64(&f.ImageCacheBytes, "image-cache-size", rack.DefaultImageCacheBytes, "bytes the image cache may hold; the least recently used images not being served are evicted")
}

func newRackRegisterCommand() *cobra.Command {
	var flags rackRegisterFlags
	c := &cobra.Command{
		Use:   "register --url URL [--url URL...] --secret SECRET",
		Short: "Register this rack with a region and store its identity and token in the state directory",
		Long: "Register this rack with a region. The region URLs are tried in turn; the secret is the\n" +
			"region's rack secret (`ironflow racks secret` on the region). A rack registered before keeps\n" +
			"its UUID. A running `rack serve` uses the new registration after a restart.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := rack.Register(cmd.Context(), rack.RegisterOptions{
				URLs:     flags.URLs,
				Secret:   flags.Secret,
				Name:     flags.Name,
				StateDir: flags.StateDir,
				Version:  version,
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "registered rack %s (%s) with region %s at %s\n", st.Name, st.Uuid, st.Region.Name, strings.Join(st.Endpoints, ", "))
			return nil
		},
	}
	flags.declare(c.Flags())
	return c
}

func newRackServeCommand() *cobra.Command {
	var flags rackServeFlags
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
			o, err := flags.options(cmd, logger)
			if err != nil {
				return err
			}
			return rack.Serve(cmd.Context(), o)
		},
	}
	flags.declare(c.Flags())
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

// options checks the serve flags.
func (f *rackServeFlags) options(cmd *cobra.Command, logger *slog.Logger) (rack.Options, error) {
	o := rack.Options{
		StateDir:             f.StateDir,
		DHCPInterfaces:       f.DHCPInterfaces,
		DHCPRelayListen:      f.DHCPRelayListen,
		RouterAdvertisements: f.RouterAdvertisements,
		TFTPListen:           f.TFTPListen,
		HTTPListen:           f.HTTPListen,
		HTTPBootURL:          f.HTTPBootURL,
		SyslogListen:         f.SyslogListen,
		BootDir:              f.BootDir,
		DNSListen:            listenList(f.DNSListen),
		ProxyListen:          listenList(f.ProxyListen),
		PodSSHKeyFile:        f.PodSSHKey,
		PodRefreshInterval:   f.PodRefreshInterval,
		Version:              version,
		Logger:               logger,
	}
	if f.ServerIP != "" {
		a, err := netip.ParseAddr(f.ServerIP)
		if err != nil || !a.Is4() {
			return rack.Options{}, fmt.Errorf("%s %q is not an IPv4 address", flagOrigin(cmd, "server-ip"), f.ServerIP)
		}
		o.ServerIP = a
	}
	var err error
	if flagValue(cmd, flagTemporalAddress) != "" {
		if o.Temporal, err = temporalOptions(cmd, logger); err != nil {
			return rack.Options{}, err
		}
		warnClearPayloads(o.Temporal, logger)
	}
	if o.RegionSecrets, err = loadRegionSecrets(f.RegionSecretsFile); err != nil {
		return rack.Options{}, err
	}
	switch {
	case f.PodRefreshInterval < 0:
		return rack.Options{}, fmt.Errorf("%s %s: want a duration such as 5m, or 0", flagOrigin(cmd, "pod-refresh-interval"), f.PodRefreshInterval)
	case f.PodRefreshInterval == 0:
		o.PodRefreshInterval = -1 // the rack's "never"
	}
	o.ImageCacheDir, o.ImageCacheBytes = f.ImageCacheDir, f.ImageCacheBytes
	if f.ImageCacheBytes <= 0 {
		return rack.Options{}, fmt.Errorf("%s %d: want a positive number of bytes", flagOrigin(cmd, "image-cache-size"), f.ImageCacheBytes)
	}
	return o, nil
}

// listenList is a repeatable listen flag (--dns-listen, --proxy-listen): nil when neither
// the flag nor its variable is set (the rack's default), empty for "none".
func listenList(values []string) []string {
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
