package rack

import (
	"io"
	"net"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/internal/testutil"
)

// TestOpenFailingHalfWayLeavesNothingListening opens a rack whose every service listens, with
// the address of one of them taken, for each service that binds in open: open names that
// service, and every other address of the rack can be bound again.
func TestOpenFailingHalfWayLeavesNothingListening(t *testing.T) {
	o := Options{
		StateDir:        t.TempDir(),
		DHCPRelayListen: testutil.FreeUDPAddr(t),
		TFTPListen:      testutil.FreeUDPAddr(t),
		HTTPListen:      testutil.FreeAddr(t),
		DNSListen:       []string{testutil.FreeDNSAddr(t)},
		SyslogListen:    testutil.FreeDNSAddr(t),
		BootDir:         t.TempDir(),
		Logger:          testLogger(t),
	}
	// Only the registration: open reaches no region.
	if err := saveState(o.StateDir, State{Uuid: "rack-uuid", Name: "rack-1", Token: "rack-token", Endpoints: []string{"http://127.0.0.1:1"}}); err != nil {
		t.Fatal(err)
	}
	listeners, err := o.Listeners()
	if err != nil {
		t.Fatal(err)
	}
	// In the order open binds them: each case has the ones before it open when it fails.
	for _, taken := range []struct {
		service, network, addr, wantErr string
	}{
		{ServiceHTTPBoot, "tcp", o.HTTPListen, "HTTP boot listen " + o.HTTPListen},
		{ServiceDNS, "udp", o.DNSListen[0], "DNS: listen udp " + o.DNSListen[0]},
		{ServiceSyslog, "tcp", o.SyslogListen, "syslog TCP: listen tcp " + o.SyslogListen},
		{ServiceDHCPRelay, "udp", o.DHCPRelayListen, "dhcp relay socket " + o.DHCPRelayListen},
	} {
		t.Run(taken.service+"/"+taken.network, func(t *testing.T) {
			holder := bind(t, taken.network, taken.addr)
			defer holder.Close()
			p, err := open(o)
			if err == nil {
				p.close()
				t.Fatalf("open with %s %s taken: no error", taken.network, taken.addr)
			}
			if !strings.Contains(err.Error(), taken.wantErr) {
				t.Fatalf("open with %s %s taken: %v, want an error naming %q", taken.network, taken.addr, err, taken.wantErr)
			}
			for _, l := range listeners {
				if l.Network == taken.network && l.Addr == taken.addr {
					continue
				}
				bind(t, l.Network, l.Addr).Close()
			}
		})
	}
}

// bind listens on addr ("udp" or "tcp"), failing the test when something else does.
func bind(t *testing.T, network, addr string) io.Closer {
	t.Helper()
	var (
		c   io.Closer
		err error
	)
	if network == "udp" {
		c, err = net.ListenPacket(network, addr)
	} else {
		c, err = net.Listen(network, addr)
	}
	if err != nil {
		t.Fatalf("%s %s still taken after open failed: %v", network, addr, err)
	}
	return c
}
