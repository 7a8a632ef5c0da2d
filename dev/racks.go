package dev

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"

	"github.com/ironflow/ironflow/internal/netutil"
	"github.com/ironflow/ironflow/rack"
)

// Rack is a rack controller of the stack, serving on loopback.
type Rack struct {
	Name      string
	Region    string
	Uuid      string
	DHCPRelay string // relayed DHCP (giaddr) on 127.0.0.1
	TFTP      string
	DNS       string // the rack's DNS server, UDP and TCP
	Syslog    string // the machines' syslog, UDP and TCP
	Proxy     string // the machines' HTTP proxy
	HTTPURL   string
	StateDir  string
	// Link is where the rack serves broadcast DHCP; nil when it does not, for the reason in
	// DHCPOff.
	Link    *RackLink
	DHCPOff string
}

// RackNames maps each region to the rack registered with it.
var RackNames = map[string]string{"region-a": "rack-a", "region-b": "rack-b"}

// startRack registers the region's rack (idempotently, so a restarted stack keeps its UUID)
// and serves it until the stack stops: DHCP relay, TFTP, DNS, syslog, HTTP boot and the machines' HTTP proxy on 127.0.0.1 high ports,
// broadcast DHCP on its link (with RackLinks) and the rack's Temporal worker.
func (s *Stack) startRack(ctx context.Context, region string) error {
	name := RackNames[region]
	r := s.Regions[region]
	secret, err := r.Store.RackSecret(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	stateDir := filepath.Join(s.StateDir, name)
	st, err := rack.Register(ctx, rack.RegisterOptions{URLs: []string{r.URL}, Secret: secret, Name: name, StateDir: stateDir, Version: s.version})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	ports := make([]int, 2)
	for i := range ports {
		if ports[i], err = netutil.FreeUDPPort(); err != nil {
			return err
		}
	}
	httpPort, err := netutil.FreePort()
	if err != nil {
		return err
	}
	dnsPort, err := netutil.FreeUDPTCPPort()
	if err != nil {
		return err
	}
	syslogPort, err := netutil.FreeUDPTCPPort()
	if err != nil {
		return err
	}
	proxyPort, err := netutil.FreePort()
	if err != nil {
		return err
	}
	bootDir := filepath.Join(stateDir, "boot")
	if err := os.MkdirAll(bootDir, 0o755); err != nil {
		return fmt.Errorf("%s boot dir: %w", name, err)
	}
	if s.discoveryImage != "" {
		if err := placeDiscoveryImage(s.discoveryImage, bootDir); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	rk := &Rack{
		Name: name, Region: region, Uuid: st.Uuid, StateDir: stateDir,
		DHCPRelay: fmt.Sprintf("127.0.0.1:%d", ports[0]),
		TFTP:      fmt.Sprintf("127.0.0.1:%d", ports[1]),
		DNS:       fmt.Sprintf("127.0.0.1:%d", dnsPort),
		Syslog:    fmt.Sprintf("127.0.0.1:%d", syslogPort),
		Proxy:     fmt.Sprintf("127.0.0.1:%d", proxyPort),
		HTTPURL:   fmt.Sprintf("http://127.0.0.1:%d", httpPort),
	}
	secrets := map[string]string{}
	for other, reg := range s.Regions {
		if sec, err := reg.Store.RackSecret(ctx); err == nil {
			secrets[other] = sec
		}
	}
	opts := rack.Options{
		StateDir:           stateDir,
		DHCPRelayListen:    rk.DHCPRelay,
		ServerIP:           netip.MustParseAddr("127.0.0.1"),
		TFTPListen:         rk.TFTP,
		DNSListen:          []string{rk.DNS},
		SyslogListen:       rk.Syslog,
		ProxyListen:        []string{rk.Proxy},
		HTTPListen:         fmt.Sprintf("127.0.0.1:%d", httpPort),
		BootDir:            bootDir,
		Temporal:           s.temporalOptions(),
		RegionSecrets:      secrets,
		PodSSHKeyFile:      s.podSSHKey,
		PodRefreshInterval: s.podRefresh,
		PowerPollInterval:  s.powerPoll,
		Version:            s.version,
		Logger:             s.log.With("rack", name),
	}
	if err := s.linkRack(rk, &opts); err != nil {
		return err
	}
	s.group.Go(func() error { return rack.Serve(s.runCtx, opts) })
	s.Racks[name] = rk
	return nil
}

// linkRack gives rk its link and has o serve DHCP on it, when the stack asks for links and
// the host allows them.
func (s *Stack) linkRack(rk *Rack, o *rack.Options) error {
	if !s.rackLinks {
		rk.DHCPOff = "the stack runs without rack links"
		return nil
	}
	if rk.DHCPOff = rackLinksOff(); rk.DHCPOff != "" {
		return nil
	}
	l := rackLinkNames(s.StateDir, slices.Index(RegionNames, rk.Region))
	if err := createRackLink(l); err != nil {
		return err
	}
	rk.Link = &l
	o.DHCPInterfaces, o.DHCPNetns, o.RouterAdvertisements = []string{l.Interface}, l.Netns, true
	return nil
}
