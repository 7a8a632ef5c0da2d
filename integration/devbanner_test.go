package integration

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/miekg/dns"

	"github.com/ironflow/ironflow/internal/testutil"
)

// rackServicesAnswer checks that the banner of a running `ironflow dev` names each service of
// rack-a and that each answers at the address it names: HTTP boot, DNS over UDP and TCP, TFTP,
// syslog over UDP and TCP, the DHCP relay listener and the machines' HTTP proxy (the last
// three seen in the rack's metrics: a message from loopback is no machine's, a relayed
// request from no subnet gets no reply, loopback is no client of the proxy), and broadcast
// DHCP on the rack's link as root, else the reason it is off.
func rackServicesAnswer(t *testing.T, d *devProcess) {
	t.Helper()
	dhcp := d.bannerValue(t, "broadcast DHCP")
	if os.Geteuid() != 0 {
		if !strings.HasPrefix(dhcp, "off: not root") {
			t.Errorf("banner DHCP line %q, want it off because the stack is not root", dhcp)
		}
	} else {
		// "IF ADDR (UDP 67) in netns NS; its machines' end IF in netns NS"
		var rackIf, addr, rackNS, machinesIf, machinesNS string
		if _, err := fmt.Sscanf(dhcp, "%s %s (UDP 67) in netns %s its machines' end %s in netns %s", &rackIf, &addr, &rackNS, &machinesIf, &machinesNS); err != nil {
			t.Fatalf("banner DHCP line %q: %v", dhcp, err)
		}
		offerFromRackA(t, machinesNS, machinesIf, netip.MustParseAddr(addr))
	}
	addr := func(label string) string { return strings.Fields(d.bannerValue(t, label))[0] }
	httpBoot, dnsAddr, tftpAddr, syslogAddr, relayAddr := addr("HTTP boot"), addr("DNS"), addr("TFTP"), addr("syslog"), addr("DHCP relay")
	proxyURL := addr("HTTP proxy")

	proxied := &http.Client{Transport: &http.Transport{Proxy: func(*http.Request) (*url.URL, error) { return url.Parse(proxyURL) }}, Timeout: 10 * time.Second}
	if resp, err := proxied.Get("http://192.0.2.1/"); err != nil {
		t.Errorf("HTTP proxy at %s: %v", proxyURL, err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("HTTP proxy at %s, asked from loopback: %s, want 403", proxyURL, resp.Status)
		}
	}

	resp, err := http.Get(httpBoot + "/healthz")
	if err != nil {
		t.Fatalf("HTTP boot at %s: %v", httpBoot, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("HTTP boot at %s: %s", httpBoot, resp.Status)
	}

	for _, network := range []string{"udp", "tcp"} {
		q := new(dns.Msg).SetQuestion("example.", dns.TypeA)
		if _, _, err := (&dns.Client{Net: network, Timeout: 10 * time.Second}).Exchange(q, dnsAddr); err != nil {
			t.Errorf("DNS over %s at %s: %v", network, dnsAddr, err)
		}
	}

	// A TFTP server answers from a port of its own (the transfer's ID): no connected socket.
	tftp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tftp.Close()
	server, err := net.ResolveUDPAddr("udp", tftpAddr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tftp.WriteTo([]byte("\x00\x01no-such-file\x00octet\x00"), server); err != nil {
		t.Fatal(err)
	}
	tftp.SetReadDeadline(time.Now().Add(10 * time.Second))
	reply := make([]byte, 512)
	if n, _, err := tftp.ReadFrom(reply); err != nil || n < 4 || reply[1] != 5 {
		t.Errorf("TFTP at %s: read %q, %v; want an error packet", tftpAddr, reply[:max(n, 0)], err)
	}

	for _, network := range []string{"udp", "tcp"} {
		c, err := net.Dial(network, syslogAddr)
		if err != nil {
			t.Fatalf("syslog over %s at %s: %v", network, syslogAddr, err)
		}
		if _, err := c.Write([]byte("<14>1 2026-12-01T00:00:00Z dev test - - - hello\n")); err != nil {
			t.Errorf("syslog over %s: %v", network, err)
		}
		c.Close()
	}

	discover, err := dhcpv4.NewDiscovery(net.HardwareAddr{0x02, 0xde, 0x00, 0x00, 0x00, 0x01}, dhcpv4.WithGatewayIP(net.IPv4(127, 0, 0, 1)))
	if err != nil {
		t.Fatal(err)
	}
	relay, err := net.Dial("udp", relayAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	if _, err := relay.Write(discover.ToBytes()); err != nil {
		t.Fatal(err)
	}

	testutil.Eventually(t, 30*time.Second, "rack-a's metrics count the syslog messages and the DHCP request", func() bool {
		m := metrics(t, httpBoot)
		return m[`ironflow_syslog_received_total{transport="udp"}`] >= 1 && m[`ironflow_syslog_received_total{transport="tcp"}`] >= 1 &&
			m.sum("ironflow_dhcp_request_duration_seconds_count")+m.sum("ironflow_dhcp_dropped_total") >= 1 &&
			m[`ironflow_proxy_refusals_total{reason="outsider"}`] >= 1
	})
}

var metricLine = regexp.MustCompile(`^(\S+) (\S+)$`)

// rackMetrics are a rack's Prometheus samples by name with labels.
type rackMetrics map[string]float64

// sum adds the samples of metric name, whatever their labels.
func (m rackMetrics) sum(name string) float64 {
	var total float64
	for k, v := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			total += v
		}
	}
	return total
}

// metrics reads the rack's Prometheus metrics.
func metrics(t *testing.T, httpBoot string) rackMetrics {
	t.Helper()
	resp, err := http.Get(httpBoot + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := rackMetrics{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if m := metricLine.FindStringSubmatch(sc.Text()); m != nil {
			out[m[1]], _ = strconv.ParseFloat(m[2], 64)
		}
	}
	return out
}
