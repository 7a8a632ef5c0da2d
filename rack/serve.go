package rack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.temporal.io/sdk/client"
	"golang.org/x/sync/errgroup"

	rackacts "github.com/ironflow/ironflow/activities/rack"
	"github.com/ironflow/ironflow/internal/netns"
	"github.com/ironflow/ironflow/rack/bootfs"
	"github.com/ironflow/ironflow/rack/dhcp"
	"github.com/ironflow/ironflow/rack/dns"
	"github.com/ironflow/ironflow/rack/httpboot"
	"github.com/ironflow/ironflow/rack/imagecache"
	"github.com/ironflow/ironflow/rack/leases"
	"github.com/ironflow/ironflow/rack/pods"
	"github.com/ironflow/ironflow/rack/proxy"
	"github.com/ironflow/ironflow/rack/ra"
	"github.com/ironflow/ironflow/rack/regionlink"
	"github.com/ironflow/ironflow/rack/syslog"
	"github.com/ironflow/ironflow/rack/tftp"
	"github.com/ironflow/ironflow/region/api"
)

// Options configure a serving rack. Empty listen addresses disable a service.
type Options struct {
	StateDir string // default DefaultStateDir

	DHCPInterfaces []string // broadcast DHCP on these interfaces
	// DHCPNetns is the network namespace (its ip netns name) that holds DHCPInterfaces:
	// their DHCP and router advertisement sockets are opened in it, every other socket in
	// the caller's (the dev stack's racks serve DHCP on a link of their own), so DNSListen's
	// default, the interfaces' addresses, does not fit it. "": the caller's.
	DHCPNetns       string
	DHCPRelayListen string     // "ip:port" for relayed requests, e.g. "127.0.0.1:1067"
	ServerIP        netip.Addr // the rack's address for relayed clients (option 54, TFTP); default: the relay listen IP
	TFTPListen      string     // e.g. ":69"
	// DNSListen are the addresses ("ip:port") the rack answers DNS on, UDP and TCP; nil
	// means port 53 on the address of each DHCP interface, empty (non-nil) none. While the
	// rack serves DNS, DHCP points clients at it (option 6) unless their subnet names DNS
	// servers.
	DNSListen  []string
	HTTPListen string // e.g. ":5248"
	// ProxyListen are the addresses ("ip:port") of the HTTP proxy for machines; nil means
	// port 8000 on the address of each DHCP interface, empty (non-nil) none.
	ProxyListen   []string
	ProxyCacheDir string // the proxy's disk cache (default <StateDir>/proxy-cache)
	SyslogListen  string // UDP and TCP, e.g. ":514"
	HTTPBootURL   string // the HTTP boot URL clients get; default http://<ServerIP>:<HTTPListen port>
	BootDir       string // served by TFTP and HTTP
	IPXEDir       string // iPXE images installed into BootDir where it has none (default bootfs.DebianIPXEDir)
	Discovery     httpboot.Boot
	// ImageCacheDir caches the region's images that HTTP boot serves (default: images in
	// StateDir); ImageCacheBytes bounds it (default DefaultImageCacheBytes).
	ImageCacheDir   string
	ImageCacheBytes int64
	// RouterAdvertisements answers IPv6 router solicitations on DHCPInterfaces with an
	// advertisement of nothing (rack/ra), so iPXE boots without waiting ~17 s for IPv6.
	RouterAdvertisements bool

	Temporal      client.Options    // the rack's worker; an empty HostPort runs none
	RegionSecrets map[string]string // rack secrets of regions the rack may move to, by name

	// PodSSHKeyFile is the rack's private key for the qemu+ssh pods it hosts; "" refuses them.
	PodSSHKeyFile string
	// PodRefreshInterval is how often the rack refreshes its pods' facts (default
	// DefaultPodRefreshInterval; negative: never, only on demand).
	PodRefreshInterval time.Duration
	// PowerPollInterval is how often the rack checks its machines' power state (default
	// DefaultPowerPollInterval; negative: never, only on demand).
	PowerPollInterval time.Duration

	HeartbeatInterval   time.Duration // default api.RackHeartbeatInterval
	RegionCheckInterval time.Duration // region health checks and config sync (default 5s)
	Version             string
	Logger              *slog.Logger
}

// Serve runs the rack until ctx ends: the region link (health checks, failover, config sync
// and cache), heartbeats, the lease table and its upload to the region, DHCP, TFTP, HTTP boot
// and, with a Temporal address, the rack's worker. It needs no region to start: the config
// comes from the link's cache and the leases from their log. One prometheus.Registry holds
// every service's metrics; HTTP boot serves it on /metrics.
func Serve(ctx context.Context, o Options) error {
	p, err := open(o)
	if err != nil {
		return err
	}
	defer p.close()
	return p.run(ctx)
}

// process is a rack ready to run: everything opened and built, nothing started.
type process struct {
	o          Options
	log        *slog.Logger
	st         State
	reg        *prometheus.Registry // every service's metrics
	table      *leases.Table
	handler    *dhcp.Handler
	config     *applier      // applies the region's config to the services
	dnsServer  *dns.Server   // nil when the rack serves no DNS
	proxy      *proxy.Server // nil when the rack serves no HTTP proxy
	region     *rackDoer     // the region through the link, for the DNS server built before it
	link       *regionlink.Link
	auth       *rackAuth
	ctrl       *controller
	uploader   *leases.Uploader
	bootDir    *bootfs.Dir       // nil when the rack serves neither TFTP nor HTTP boot
	images     *imagecache.Cache // nil when the rack serves no HTTP boot
	pods       pods.Dialer
	services   []func(context.Context) error // the servers, sockets open
	syslogAddr netip.AddrPort                // where the syslog receiver listens, when it does
	closers    []func() error
}

// open builds the rack, one opener after the other. Each opener adds what it opens to
// p.closers, which close when a later one fails. The DHCP sockets, which only their Serve
// closes, open last, so a setup error leaves nothing behind.
func open(o Options) (_ *process, err error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	p := &process{o: o, log: o.Logger, region: &rackDoer{}}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	for _, opener := range []func() error{
		p.openState,
		p.openPods,
		p.openMetrics,
		p.openLeases,
		p.openDHCPHandler,
		p.openDNSServer,
		p.openProxyServer,
		p.openLink,
		p.openController,
		p.openLeaseSync,
		p.openBootDir,
		p.openTFTP,
		p.openImages,
		p.openSyslog, // before HTTP boot, whose discovery scripts name its address
		p.openHTTPBoot,
		p.openDNSListeners,
		p.openProxyListeners,
		p.openDHCP,
		p.openRouterAdvertisements,
	} {
		if err := opener(); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// openState reads the rack's registration.
func (p *process) openState() (err error) {
	p.st, err = LoadState(p.o.StateDir)
	return err
}

// openPods prepares the dialer of the rack's pods, with its SSH key when it has one.
func (p *process) openPods() (err error) {
	p.pods.Timeout = podDialTimeout
	if p.o.PodSSHKeyFile != "" {
		p.pods.SSHKey, err = pods.LoadSSHKey(p.o.PodSSHKeyFile)
	}
	return err
}

// openMetrics makes the registry every service registers its metrics with, the Go
// runtime's first.
func (p *process) openMetrics() error {
	p.reg = prometheus.NewRegistry()
	return p.reg.Register(collectors.NewGoCollector())
}

// openLeases opens the lease table over its write-ahead log.
func (p *process) openLeases() (err error) {
	if p.table, err = leases.Open(leases.Options{Dir: filepath.Join(p.o.StateDir, leasesDir), Rack: p.st.Uuid, Logger: p.log.With("component", "leases")}); err != nil {
		return fmt.Errorf("lease table: %w", err)
	}
	p.closers = append(p.closers, p.table.Close)
	return nil
}

// openDHCPHandler builds the DHCP handler over the lease table, and the applier that
// configures it and the other services with the region's config.
func (p *process) openDHCPHandler() error {
	m, err := dhcp.NewMetrics(p.reg)
	if err != nil {
		return err
	}
	base := dhcp.Config{ServerIP: p.o.ServerIP, Boot: dhcp.Boot{HTTPBaseURL: p.o.HTTPBootURL}, ServeDNS: len(p.o.DNSListen) > 0}
	if p.handler, err = dhcp.NewHandler(base, p.table, m, p.log.With("component", "dhcp")); err != nil {
		return err
	}
	p.config = newApplier(p.st.Uuid, p.handler, p.table, base, p.log.With("component", "config"))
	return nil
}

// openDNSServer builds the DNS server. It asks the region through the link, which is built
// over the cached config that configures the DNS server: the server gets the link once it
// exists (openLink).
func (p *process) openDNSServer() (err error) {
	if len(p.o.DNSListen) == 0 {
		return nil
	}
	if p.dnsServer, err = dns.New(dns.Config{Region: dns.Region{Link: p.region}, Registry: p.reg, Logger: p.log.With("component", "dns")}); err != nil {
		return err
	}
	p.config.dns = p.dnsServer
	return nil
}

// openLink builds the region link over the cached config. The stored registration names the
// region: a move that crashed before the link swapped, or a new `rack register`, is
// completed here.
func (p *process) openLink() error {
	p.auth = newRackAuth(p.st.Token)
	link, err := regionlink.New(regionlink.Config{
		Endpoints:  p.st.Endpoints,
		StateDir:   filepath.Join(p.o.StateDir, linkDir),
		Interval:   p.o.RegionCheckInterval,
		ConfigPath: api.PathPrefix + "/racks/" + p.st.Uuid + "/config",
		OnConfig:   p.config.apply,
		Transport:  p.auth,
		Logger:     p.log,
	})
	if err != nil {
		return err
	}
	if eps := link.Endpoints(); len(eps) < len(p.st.Endpoints) || !slices.Equal(eps[:len(p.st.Endpoints)], p.st.Endpoints) {
		if err := link.SwapEndpoints(p.st.Endpoints); err != nil {
			return err
		}
	}
	p.link = link
	p.region.set(link)
	return nil
}

// openController builds the rack as its heartbeats and activities see it.
func (p *process) openController() error {
	p.ctrl = &controller{stateDir: p.o.StateDir, version: p.o.Version, interfaces: p.o.DHCPInterfaces, link: p.link,
		auth: p.auth, region: regionAPI{link: p.link, rack: p.st.Uuid}, table: p.table,
		hc: &http.Client{Timeout: 30 * time.Second}, log: p.log, st: p.st}
	if p.ctrl.interfaces == nil {
		p.ctrl.interfaces = []string{}
	}
	return nil
}

// openLeaseSync builds the upload of the lease table to the region.
func (p *process) openLeaseSync() (err error) {
	p.uploader, err = leases.NewUploader(p.table, p.ctrl.region, leases.UploaderOptions{Registry: p.reg, Logger: p.log.With("component", "lease-sync")})
	return err
}

// openBootDir opens the boot directory TFTP and HTTP boot serve. The iPXE images DHCP points
// PXE clients at come from Debian's ipxe package when the boot dir has none of its own.
func (p *process) openBootDir() error {
	if p.o.TFTPListen == "" && p.o.HTTPListen == "" {
		return nil
	}
	dir, err := bootfs.Open(p.o.BootDir)
	if err != nil {
		return err
	}
	p.closers = append(p.closers, dir.Close)
	p.bootDir = dir
	installed, err := dir.InstallIPXE(p.o.IPXEDir)
	if err != nil {
		return err
	}
	if len(installed) > 0 {
		p.log.Info("iPXE binaries installed in the boot dir", "from", p.o.IPXEDir, "files", installed)
	}
	return nil
}

// openTFTP builds the TFTP server of the boot dir; it binds its socket when it serves.
func (p *process) openTFTP() error {
	if p.o.TFTPListen == "" {
		return nil
	}
	srv, err := tftp.New(tftp.Config{Addr: p.o.TFTPListen, Dir: p.bootDir, Serves: p.config.Serves, Registry: p.reg, Logger: p.log.With("component", "tftp")})
	if err != nil {
		return err
	}
	p.services = append(p.services, running(&p.ctrl.tftpUp, srv.Serve))
	return nil
}

// openHTTPBoot builds the HTTP boot server and binds its listener here, like the DHCP
// sockets: a port in use fails open, and the socket belongs to the network namespace open
// runs in.
func (p *process) openHTTPBoot() error {
	if p.o.HTTPListen == "" {
		return nil
	}
	srv, err := httpboot.New(httpboot.Config{Dir: p.bootDir, Machines: p.config, Discovery: p.o.Discovery, Syslog: p.syslogAddr,
		Region: p.link, Enlister: p.ctrl.region, Registry: p.reg, Logger: p.log, ProxyURL: p.proxyURL, Images: p.images, Serves: p.config.Serves})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", p.o.HTTPListen)
	if err != nil {
		return fmt.Errorf("HTTP boot listen %s: %w", p.o.HTTPListen, err)
	}
	p.closers = append(p.closers, func() error {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			return err
		}
		return nil
	})
	p.services = append(p.services, running(&p.ctrl.httpUp, func(ctx context.Context) error { return srv.ServeListener(ctx, ln) }))
	return nil
}

// openDNSListeners opens the UDP socket and TCP listener of every DNS address.
func (p *process) openDNSListeners() error {
	for _, addr := range p.o.DNSListen {
		pc, ln, err := dns.Listen(addr)
		if err != nil {
			return err
		}
		p.closers = append(p.closers, pc.Close, ln.Close)
		p.services = append(p.services, func(ctx context.Context) error { return p.dnsServer.Serve(ctx, pc, ln) })
	}
	return nil
}

// openSyslog opens the syslog receiver and its forwarder to the region.
func (p *process) openSyslog() error {
	if p.o.SyslogListen == "" {
		return nil
	}
	m, err := syslog.NewMetrics(p.reg)
	if err != nil {
		return err
	}
	log := p.log.With("component", "syslog")
	fwd := syslog.NewForwarder(p.ctrl.region, m, syslog.ForwarderOptions{Logger: log})
	srv, err := syslog.New(syslog.Config{Addr: p.o.SyslogListen, Attribute: p.config.Attribute, Forwarder: fwd, Metrics: m, Logger: log})
	if err != nil {
		return err
	}
	p.closers = append(p.closers, srv.Close)
	p.syslogAddr = srv.Addr()
	log.Info("receiving syslog", "address", p.syslogAddr)
	p.services = append(p.services, srv.Serve, func(ctx context.Context) error { return fwd.Serve(asRack(ctx)) })
	return nil
}

// openDHCP opens the DHCP sockets of the interfaces and the relay address. Nothing that can
// fail comes after it: only the server's Serve closes them.
func (p *process) openDHCP() error {
	if len(p.o.DHCPInterfaces) == 0 && p.o.DHCPRelayListen == "" {
		return nil
	}
	srv, err := dhcp.NewServer(p.handler, dhcp.ServerConfig{Interfaces: p.o.DHCPInterfaces, InterfacesNetns: p.o.DHCPNetns, RelayAddr: p.o.DHCPRelayListen, Logger: p.log.With("component", "dhcp")})
	if err != nil {
		return err
	}
	p.services = append(p.services, running(&p.ctrl.dhcpUp, srv.Serve))
	return nil
}

// openRouterAdvertisements opens the ICMPv6 socket of the DHCP interfaces, last: it never
// fails open, and its Serve closes it. A host without IPv6 serves DHCP all the same; iPXE
// then only boots later.
func (p *process) openRouterAdvertisements() error {
	if len(p.o.DHCPInterfaces) == 0 || !p.o.RouterAdvertisements {
		return nil
	}
	var r *ra.Responder
	err := netns.Run(p.o.DHCPNetns, func() (err error) {
		r, err = ra.Listen(p.o.DHCPInterfaces, p.log.With("component", "ra"))
		return err
	})
	if err != nil {
		p.log.Warn("not answering IPv6 router solicitations: iPXE clients wait for IPv6 before they boot", "error", err)
		return nil
	}
	p.services = append(p.services, r.Serve)
	return nil
}

// run serves until ctx ends or a service fails.
func (p *process) run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	for _, serve := range p.services {
		g.Go(func() error { return serve(ctx) })
	}
	g.Go(func() error { return p.link.Serve(asRack(ctx)) })
	g.Go(func() error { return p.ctrl.heartbeats(ctx, p.o.HeartbeatInterval) })
	g.Go(func() error { return p.uploader.Serve(asRack(ctx)) })
	acts := rackacts.WithPower(rackacts.New(p.ctrl, p.o.RegionSecrets, rackacts.Pods{Region: p.ctrl.region, Dialer: p.pods}),
		rackacts.Power{Region: p.ctrl.region, Drivers: powerDrivers})
	if p.o.Temporal.HostPort != "" {
		g.Go(func() error { return runWorker(ctx, p.o, p.st.Uuid, acts, p.log.With("component", "worker")) })
	} else {
		p.log.Info("no Temporal address: the rack runs no worker")
	}
	if p.o.PodRefreshInterval > 0 {
		g.Go(func() error {
			return every(ctx, p.o.PodRefreshInterval, "pod refresh", p.log.With("component", "pods"), func(ctx context.Context) error {
				return rackacts.RefreshPods(asRack(ctx), acts)
			})
		})
	}
	if p.o.PowerPollInterval > 0 {
		g.Go(func() error {
			return every(ctx, p.o.PowerPollInterval, "power poll", p.log.With("component", "power"), func(ctx context.Context) error {
				return rackacts.PollPower(asRack(ctx), acts)
			})
		})
	}
	p.log.Info("rack serving", "rack", p.st.Uuid, "name", p.st.Name, "region", p.st.Region.Name, "endpoints", p.link.Endpoints())
	return g.Wait()
}

func (p *process) close() {
	for i := len(p.closers) - 1; i >= 0; i-- {
		if err := p.closers[i](); err != nil {
			p.log.Warn("closing rack state", "error", err)
		}
	}
}

// running marks up as true while serve runs.
func running(up *atomic.Bool, serve func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		up.Store(true)
		defer up.Store(false)
		return serve(ctx)
	}
}

func (o *Options) defaults() error {
	if o.StateDir == "" {
		o.StateDir = DefaultStateDir
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = api.RackHeartbeatInterval
	}
	if o.PodRefreshInterval == 0 {
		o.PodRefreshInterval = DefaultPodRefreshInterval
	}
	if o.ImageCacheBytes <= 0 {
		o.ImageCacheBytes = DefaultImageCacheBytes
	}
	if o.PowerPollInterval == 0 {
		o.PowerPollInterval = DefaultPowerPollInterval
	}
	if o.IPXEDir == "" {
		o.IPXEDir = bootfs.DebianIPXEDir
	}
	if o.Discovery.BootEnv == "" {
		o.Discovery = BootEnvBoot("discovery")
	}
	if !o.ServerIP.IsValid() && len(o.DHCPInterfaces) > 0 {
		if a, err := o.interfaceAddr(o.DHCPInterfaces[0]); err == nil {
			o.ServerIP = a
		}
	}
	if !o.ServerIP.IsValid() && o.DHCPRelayListen != "" {
		ap, err := netip.ParseAddrPort(o.DHCPRelayListen)
		if err != nil {
			return fmt.Errorf("DHCP relay listen address %q: want ip:port: %w", o.DHCPRelayListen, err)
		}
		if !ap.Addr().IsUnspecified() {
			o.ServerIP = ap.Addr()
		}
	}
	if o.DHCPRelayListen != "" && !o.ServerIP.IsValid() {
		return errors.New("relayed DHCP needs the rack's address: give a server IP or a specific relay listen address")
	}
	if o.DNSListen == nil {
		o.DNSListen = []string{}
		for _, ifname := range o.DHCPInterfaces {
			a, err := o.interfaceAddr(ifname)
			if err != nil {
				o.Logger.Warn("no DNS on a DHCP interface without an IPv4 address", "interface", ifname, "error", err)
				continue
			}
			o.DNSListen = append(o.DNSListen, net.JoinHostPort(a.String(), "53"))
		}
	}
	if o.ProxyListen == nil {
		o.ProxyListen = []string{}
		for _, ifname := range o.DHCPInterfaces {
			if a, err := o.interfaceAddr(ifname); err == nil {
				o.ProxyListen = append(o.ProxyListen, net.JoinHostPort(a.String(), strconv.Itoa(proxy.DefaultPort)))
			}
		}
	}
	if o.ProxyCacheDir == "" {
		o.ProxyCacheDir = filepath.Join(o.StateDir, proxyCacheDir)
	}
	if o.HTTPBootURL == "" && o.HTTPListen != "" && o.ServerIP.IsValid() {
		_, port, err := net.SplitHostPort(o.HTTPListen)
		if err != nil {
			return fmt.Errorf("HTTP listen address %q: %w", o.HTTPListen, err)
		}
		o.HTTPBootURL = "http://" + net.JoinHostPort(o.ServerIP.String(), port)
	}
	if o.SyslogListen != "" {
		if _, err := net.ResolveUDPAddr("udp", o.SyslogListen); err != nil {
			return fmt.Errorf("syslog listen address %q: want [ip]:port: %w", o.SyslogListen, err)
		}
	}
	if (o.TFTPListen != "" || o.HTTPListen != "") && o.BootDir == "" {
		return errors.New("TFTP and HTTP boot need a boot directory")
	}
	return nil
}

// interfaceAddr is the first IPv4 address of DHCP interface name, in DHCPNetns.
func (o *Options) interfaceAddr(name string) (addr netip.Addr, err error) {
	err = netns.Run(o.DHCPNetns, func() error {
		addr, err = localInterfaceAddr(name)
		return err
	})
	return addr, err
}

func localInterfaceAddr(name string) (netip.Addr, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return netip.Addr{}, err
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return netip.Addr{}, err
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if v, ok := netip.AddrFromSlice(n.IP.To4()); ok {
				return v, nil
			}
		}
	}
	return netip.Addr{}, fmt.Errorf("interface %s has no IPv4 address", name)
}

// rackDoer sends requests as the rack (with its token) through the region link, once the
// link is built.
type rackDoer struct {
	link atomic.Pointer[regionlink.Link]
}

func (d *rackDoer) set(l *regionlink.Link) { d.link.Store(l) }

// endpoints are the link's region endpoints, none before it is built.
func (d *rackDoer) endpoints() []string {
	if l := d.link.Load(); l != nil {
		return l.Endpoints()
	}
	return nil
}

func (d *rackDoer) Do(req *http.Request) (*http.Response, error) {
	l := d.link.Load()
	if l == nil {
		return nil, errors.New("region link not ready")
	}
	return l.Do(req.WithContext(asRack(req.Context())))
}
