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
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.temporal.io/sdk/client"
	"golang.org/x/sync/errgroup"

	rackacts "github.com/ironflow/ironflow/activities/rack"
	"github.com/ironflow/ironflow/rack/bootfs"
	"github.com/ironflow/ironflow/rack/dhcp"
	"github.com/ironflow/ironflow/rack/dns"
	"github.com/ironflow/ironflow/rack/httpboot"
	"github.com/ironflow/ironflow/rack/leases"
	"github.com/ironflow/ironflow/rack/pods"
	"github.com/ironflow/ironflow/rack/ra"
	"github.com/ironflow/ironflow/rack/regionlink"
	"github.com/ironflow/ironflow/rack/syslog"
	"github.com/ironflow/ironflow/rack/tftp"
	"github.com/ironflow/ironflow/region/api"
)

// Options configure a serving rack. Empty listen addresses disable a service.
type Options struct {
	StateDir string // default DefaultStateDir

	DHCPInterfaces  []string   // broadcast DHCP on these interfaces
	DHCPRelayListen string     // "ip:port" for relayed requests, e.g. "127.0.0.1:1067"
	ServerIP        netip.Addr // the rack's address for relayed clients (option 54, TFTP); default: the relay listen IP
	TFTPListen      string     // e.g. ":69"
	// DNSListen are the addresses ("ip:port") the rack answers DNS on, UDP and TCP; nil
	// means port 53 on the address of each DHCP interface, empty (non-nil) none. While the
	// rack serves DNS, DHCP points clients at it (option 6) unless their subnet names DNS
	// servers.
	DNSListen    []string
	HTTPListen   string // e.g. ":5248"
	SyslogListen string // UDP and TCP, e.g. ":514"
	HTTPBootURL  string // the HTTP boot URL clients get; default http://<ServerIP>:<HTTPListen port>
	BootDir      string // served by TFTP and HTTP
	IPXEDir      string // iPXE images installed into BootDir where it has none (default bootfs.DebianIPXEDir)
	Discovery    httpboot.Boot
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
	table      *leases.Table
	uploader   *leases.Uploader
	link       *regionlink.Link
	auth       *rackAuth
	ctrl       *controller
	pods       pods.Dialer
	services   []func(context.Context) error // the servers, sockets open
	syslogAddr netip.AddrPort                // where the syslog receiver listens, when it does
	closers    []func() error
}

// open builds the rack. The DHCP sockets open last, so a setup error leaves nothing behind.
func open(o Options) (_ *process, err error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	p := &process{o: o, log: o.Logger}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	if p.st, err = LoadState(o.StateDir); err != nil {
		return nil, err
	}
	p.pods.Timeout = podDialTimeout
	if o.PodSSHKeyFile != "" {
		if p.pods.SSHKey, err = pods.LoadSSHKey(o.PodSSHKeyFile); err != nil {
			return nil, err
		}
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, err
	}
	if p.table, err = leases.Open(leases.Options{Dir: filepath.Join(o.StateDir, leasesDir), Rack: p.st.Uuid, Logger: p.log.With("component", "leases")}); err != nil {
		return nil, fmt.Errorf("lease table: %w", err)
	}
	p.closers = append(p.closers, p.table.Close)
	dhcpMetrics, err := dhcp.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	base := dhcp.Config{ServerIP: o.ServerIP, Boot: dhcp.Boot{HTTPBaseURL: o.HTTPBootURL}, ServeDNS: len(o.DNSListen) > 0}
	handler, err := dhcp.NewHandler(base, p.table, dhcpMetrics, p.log.With("component", "dhcp"))
	if err != nil {
		return nil, err
	}
	cfg := newApplier(p.st.Uuid, handler, p.table, base, p.log.With("component", "config"))
	// The DNS server asks the region through the link, which is built over the cached config
	// that configures the DNS server: the server gets the link once it exists.
	region := &rackDoer{}
	var dnsSrv *dns.Server
	if len(o.DNSListen) > 0 {
		if dnsSrv, err = dns.New(dns.Config{Region: dns.Region{Link: region}, Registry: reg, Logger: p.log.With("component", "dns")}); err != nil {
			return nil, err
		}
		cfg.dns = dnsSrv
	}
	if err := p.openLink(cfg); err != nil {
		return nil, err
	}
	region.set(p.link)
	p.ctrl = &controller{stateDir: o.StateDir, version: o.Version, interfaces: o.DHCPInterfaces, link: p.link,
		auth: p.auth, region: regionAPI{link: p.link, rack: p.st.Uuid}, table: p.table,
		hc: &http.Client{Timeout: 30 * time.Second}, log: p.log, st: p.st}
	if p.ctrl.interfaces == nil {
		p.ctrl.interfaces = []string{}
	}
	if p.uploader, err = leases.NewUploader(p.table, p.ctrl.region, leases.UploaderOptions{Registry: reg, Logger: p.log.With("component", "lease-sync")}); err != nil {
		return nil, err
	}

	if o.TFTPListen != "" || o.HTTPListen != "" {
		dir, err := bootfs.Open(o.BootDir)
		if err != nil {
			return nil, err
		}
		p.closers = append(p.closers, dir.Close)
		// The iPXE images DHCP points PXE clients at come from Debian's ipxe package when the
		// boot dir has none of its own.
		installed, err := dir.InstallIPXE(o.IPXEDir)
		if err != nil {
			return nil, err
		}
		if len(installed) > 0 {
			p.log.Info("iPXE binaries installed in the boot dir", "from", o.IPXEDir, "files", installed)
		}
		if o.TFTPListen != "" {
			srv, err := tftp.New(tftp.Config{Addr: o.TFTPListen, Dir: dir, Serves: cfg.Serves, Registry: reg, Logger: p.log.With("component", "tftp")})
			if err != nil {
				return nil, err
			}
			p.services = append(p.services, running(&p.ctrl.tftpUp, srv.Serve))
		}
		if o.HTTPListen != "" {
			srv, err := httpboot.New(httpboot.Config{Dir: dir, Machines: cfg, Discovery: o.Discovery,
				Region: p.link, Enlister: p.ctrl.region, Registry: reg, Logger: p.log})
			if err != nil {
				return nil, err
			}
			// Bound here, like the DHCP sockets: a port in use fails open, and the socket
			// belongs to the network namespace open runs in.
			ln, err := net.Listen("tcp", o.HTTPListen)
			if err != nil {
				return nil, fmt.Errorf("HTTP boot listen %s: %w", o.HTTPListen, err)
			}
			p.closers = append(p.closers, func() error {
				if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
					return err
				}
				return nil
			})
			p.services = append(p.services, running(&p.ctrl.httpUp, func(ctx context.Context) error { return srv.ServeListener(ctx, ln) }))
		}
	}
	for _, addr := range o.DNSListen {
		pc, ln, err := dns.Listen(addr)
		if err != nil {
			return nil, err
		}
		p.closers = append(p.closers, pc.Close, ln.Close)
		p.services = append(p.services, func(ctx context.Context) error { return dnsSrv.Serve(ctx, pc, ln) })
	}
	if o.SyslogListen != "" {
		if err := p.openSyslog(reg, cfg); err != nil {
			return nil, err
		}
	}
	if len(o.DHCPInterfaces) > 0 || o.DHCPRelayListen != "" {
		srv, err := dhcp.NewServer(handler, dhcp.ServerConfig{Interfaces: o.DHCPInterfaces, RelayAddr: o.DHCPRelayListen, Logger: p.log.With("component", "dhcp")})
		if err != nil {
			return nil, err
		}
		p.services = append(p.services, running(&p.ctrl.dhcpUp, srv.Serve))
	}
	// Last: nothing fails after the socket is open, and Serve closes it. A host without IPv6
	// serves DHCP all the same; iPXE then only boots later.
	if len(o.DHCPInterfaces) > 0 && o.RouterAdvertisements {
		r, err := ra.Listen(o.DHCPInterfaces, p.log.With("component", "ra"))
		if err != nil {
			p.log.Warn("not answering IPv6 router solicitations: iPXE clients wait for IPv6 before they boot", "error", err)
		} else {
			p.services = append(p.services, r.Serve)
		}
	}
	return p, nil
}

// openSyslog opens the syslog receiver and its forwarder to the region.
func (p *process) openSyslog(reg prometheus.Registerer, cfg *applier) error {
	m, err := syslog.NewMetrics(reg)
	if err != nil {
		return err
	}
	log := p.log.With("component", "syslog")
	fwd := syslog.NewForwarder(p.ctrl.region, m, syslog.ForwarderOptions{Logger: log})
	srv, err := syslog.New(syslog.Config{Addr: p.o.SyslogListen, Attribute: cfg.Attribute, Forwarder: fwd, Metrics: m, Logger: log})
	if err != nil {
		return err
	}
	p.closers = append(p.closers, srv.Close)
	p.syslogAddr = srv.Addr()
	log.Info("receiving syslog", "address", p.syslogAddr)
	p.services = append(p.services, srv.Serve, func(ctx context.Context) error { return fwd.Serve(asRack(ctx)) })
	return nil
}

// openLink builds the region link over the cached config. The stored registration names the
// region: a move that crashed before the link swapped, or a new `rack register`, is
// completed here.
func (p *process) openLink(cfg *applier) error {
	p.auth = newRackAuth(p.st.Token)
	link, err := regionlink.New(regionlink.Config{
		Endpoints:  p.st.Endpoints,
		StateDir:   filepath.Join(p.o.StateDir, linkDir),
		Interval:   p.o.RegionCheckInterval,
		ConfigPath: api.PathPrefix + "/racks/" + p.st.Uuid + "/config",
		OnConfig:   cfg.apply,
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
	acts := rackacts.New(p.ctrl, p.o.RegionSecrets, rackacts.Pods{Region: p.ctrl.region, Dialer: p.pods})
	if p.o.Temporal.HostPort != "" {
		g.Go(func() error { return runWorker(ctx, p.o, p.st.Uuid, acts, p.log.With("component", "worker")) })
	} else {
		p.log.Info("no Temporal address: the rack runs no worker")
	}
	if p.o.PodRefreshInterval > 0 {
		g.Go(func() error { return refreshPods(ctx, p.o.PodRefreshInterval, acts, p.log.With("component", "pods")) })
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
	if o.IPXEDir == "" {
		o.IPXEDir = bootfs.DebianIPXEDir
	}
	if o.Discovery.BootEnv == "" {
		o.Discovery = BootEnvBoot("discovery")
	}
	if !o.ServerIP.IsValid() && len(o.DHCPInterfaces) > 0 {
		if a, err := interfaceAddr(o.DHCPInterfaces[0]); err == nil {
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
			a, err := interfaceAddr(ifname)
			if err != nil {
				o.Logger.Warn("no DNS on a DHCP interface without an IPv4 address", "interface", ifname, "error", err)
				continue
			}
			o.DNSListen = append(o.DNSListen, net.JoinHostPort(a.String(), "53"))
		}
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

// interfaceAddr is the first IPv4 address of the named interface.
func interfaceAddr(name string) (netip.Addr, error) {
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

func (d *rackDoer) Do(req *http.Request) (*http.Response, error) {
	l := d.link.Load()
	if l == nil {
		return nil, errors.New("region link not ready")
	}
	return l.Do(req.WithContext(asRack(req.Context())))
}
