package httpboot

import (
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ironflow/ironflow/rack/bootfs"
	"github.com/ironflow/ironflow/rack/regionlink"
	"github.com/ironflow/ironflow/rack/regionlink/regionlinktest"
	"github.com/ironflow/ironflow/region/api"
)

func TestIPXEScripts(t *testing.T) {
	lookup := machines{errMAC: "52:54:00:00:00:99", boots: map[string]Boot{
		"52:54:00:ab:cd:01": {BootEnv: "ubuntu-24.04-install", Kernel: "ubuntu/vmlinuz",
			Initrds: []string{"ubuntu/initrd.img"}, Cmdline: "console=ttyS0 ip=dhcp"},
		"52:54:00:00:00:02": {BootEnv: BootEnvLocal},
		"52:54:00:00:00:03": {BootEnv: "remote", Kernel: "https://mirror.example/vmlinuz",
			Initrds: []string{"ucode.img", "https://mirror.example/initrd.img"}},
		"52:54:00:00:00:04": {BootEnv: "broken", Kernel: "vmlinuz", Cmdline: "quiet\nshell"},
	}}
	rack := startRack(t, lookup, regionlinktest.Start(t, "a").URL)
	base := rack.url
	tests := []struct {
		name     string
		path     string
		wantCode int
		want     []string // lines the script must contain
	}{
		{"generic chain", "/ipxe/boot.ipxe", 200, []string{"#!ipxe\n",
			"chain --replace " + base + "/ipxe/mac/${netX/mac:hexhyp}.ipxe || goto wait\n"}},
		{"known, hyphens", "/ipxe/mac/52-54-00-ab-cd-01.ipxe", 200, []string{"#!ipxe\n",
			"kernel " + base + "/boot/ubuntu/vmlinuz initrd=initrd.img console=ttyS0 ip=dhcp\n",
			"initrd " + base + "/boot/ubuntu/initrd.img\n", "boot\n"}},
		{"known, colons, upper case", "/ipxe/mac/52:54:00:AB:CD:01.ipxe", 200, []string{
			"kernel " + base + "/boot/ubuntu/vmlinuz initrd=initrd.img console=ttyS0 ip=dhcp\n"}},
		{"local disk", "/ipxe/mac/52-54-00-00-00-02.ipxe", 200, []string{"#!ipxe\n", "\nexit\n"}},
		{"absolute URLs", "/ipxe/mac/52-54-00-00-00-03.ipxe", 200, []string{
			"kernel https://mirror.example/vmlinuz initrd=ucode.img initrd=initrd.img\n",
			"initrd " + base + "/boot/ucode.img\n", "initrd https://mirror.example/initrd.img\n"}},
		{"unknown enlists", "/ipxe/mac/52-54-00-aa-bb-cc.ipxe", 200, []string{"unknown machine 52:54:00:aa:bb:cc, enlisting",
			"chain --replace " + base + "/ipxe/enlist?mac=${netX/mac:hexhyp}&uuid=${uuid}&serial=${serial:hexraw}&manufacturer=${manufacturer:hexraw}" +
				"&product=${product:hexraw}&buildarch=${buildarch:uristring}&platform=${platform:uristring} || goto discovery\n:discovery\n",
			"kernel " + base + "/boot/discovery/vmlinuz initrd=initrd.img console=ttyS0 ironflow.mode=enlist ironflow.url=" + base + " BOOTIF=01-52-54-00-aa-bb-cc\n",
			"initrd " + base + "/boot/discovery/initrd.img\n"}},
		{"enlistment report", "/ipxe/enlist?mac=52-54-00-aa-bb-cc&uuid=4c4c4544-0042-3510-8051-b7c04f4e3732&serial=435a2031323334" +
			"&manufacturer=44656c6c20496e632e&product=506f77657245646765205236343020&buildarch=x86_64&platform=efi", 200, []string{
			"# Ironflow: enlisting machine 52:54:00:aa:bb:cc, boot env discovery\n", "echo Ironflow: enlisted as new machine new-1\n",
			"kernel " + base + "/boot/discovery/vmlinuz initrd=initrd.img console=ttyS0 ironflow.mode=enlist ironflow.url=" + base + " BOOTIF=01-52-54-00-aa-bb-cc\n"}},
		{"enlistment report without a MAC", "/ipxe/enlist?uuid=4c4c4544-0042-3510-8051-b7c04f4e3732", 400, nil},
		{"enlistment report, unknown parameter", "/ipxe/enlist?mac=52-54-00-aa-bb-cc&x=1", 400, nil},
		{"enlistment report, parameter twice", "/ipxe/enlist?mac=52-54-00-aa-bb-cc&serial=61&serial=62", 400, nil},
		{"enlistment report, control character", "/ipxe/enlist?mac=52-54-00-aa-bb-cc&product=610a6b65726e656c206576696c", 400, nil},
		{"enlistment report, control character in a plain parameter", "/ipxe/enlist?mac=52-54-00-aa-bb-cc&platform=a%0Akernel%20evil", 400, nil},
		{"enlistment report, invalid UTF-8", "/ipxe/enlist?mac=52-54-00-aa-bb-cc&manufacturer=ff", 400, nil},
		{"enlistment report, serial not hex", "/ipxe/enlist?mac=52-54-00-aa-bb-cc&serial=CZ%201234", 400, nil},
		{"enlistment report, odd hex", "/ipxe/enlist?mac=52-54-00-aa-bb-cc&serial=435", 400, nil},
		{"enlistment report, too long", "/ipxe/enlist?mac=52-54-00-aa-bb-cc&serial=" + strings.Repeat("78", api.MaxEnlistValue+1), 400, nil},
		{"not a MAC", "/ipxe/mac/zz-54-00-aa-bb-cc.ipxe", 400, nil},
		{"wrong suffix", "/ipxe/mac/52-54-00-aa-bb-cc.txt", 400, nil},
		{"lookup error", "/ipxe/mac/52-54-00-00-00-99.ipxe", 503, nil},
		{"script injection refused", "/ipxe/mac/52-54-00-00-00-04.ipxe", 500, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := get(t, base+tt.path)
			if resp.StatusCode != tt.wantCode {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.wantCode, body)
			}
			if tt.wantCode == http.StatusOK && resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
				t.Fatalf("content type %q", resp.Header.Get("Content-Type"))
			}
			for _, w := range tt.want {
				if !contains(body, w) {
					t.Fatalf("script lacks %q:\n%s", w, body)
				}
			}
		})
	}
}

func TestNewValidatesConfig(t *testing.T) {
	d, err := bootfs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	link, err := regionlink.New(regionlink.Config{Endpoints: []string{"http://127.0.0.1:1"}, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	valid := func() Config {
		return Config{Dir: d, Machines: machines{}, Discovery: discovery, Region: link, Enlister: &enlister{}, Registry: prometheus.NewRegistry()}
	}
	tests := []struct {
		name   string
		mutate func(*Config)
		ok     bool
	}{
		{"valid", func(*Config) {}, true},
		{"no boot dir", func(c *Config) { c.Dir = nil }, false},
		{"no lookup", func(c *Config) { c.Machines = nil }, false},
		{"no region", func(c *Config) { c.Region = nil }, false},
		{"no enlister", func(c *Config) { c.Enlister = nil }, false},
		{"no registry", func(c *Config) { c.Registry = nil }, false},
		{"discovery without kernel", func(c *Config) { c.Discovery = Boot{BootEnv: "discovery"} }, false},
		{"discovery with newline", func(c *Config) { c.Discovery.Cmdline = "a\nb" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := valid()
			tt.mutate(&cfg)
			if _, err := New(cfg); (err == nil) != tt.ok {
				t.Fatalf("New: err = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

// TestDiscoveryScriptNamesTheRacksSyslog: the discovery environment is told where the rack
// receives syslog, at the address the machine reached HTTP boot at when the rack listens on
// every address, and not at all when the rack receives none.
func TestDiscoveryScriptNamesTheRacksSyslog(t *testing.T) {
	for _, tt := range []struct {
		name   string
		syslog netip.AddrPort
		want   string // the parameter, "" for none
	}{
		{"every address", netip.MustParseAddrPort("0.0.0.0:514"), api.KernelParamSyslog + "=127.0.0.1:514"},
		{"one address", netip.MustParseAddrPort("10.77.0.1:5514"), api.KernelParamSyslog + "=10.77.0.1:5514"},
		{"no syslog", netip.AddrPort{}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rack := startRackWithConfig(t, func(c *Config) { c.Syslog = tt.syslog }, machines{}, regionlinktest.Start(t, "a").URL)
			_, body := get(t, rack.url+"/ipxe/mac/52-54-00-aa-bb-cc.ipxe")
			var kernel string
			for line := range strings.Lines(string(body)) {
				if strings.HasPrefix(line, "kernel ") {
					kernel = line
				}
			}
			got := ""
			for _, f := range strings.Fields(kernel) {
				if strings.HasPrefix(f, api.KernelParamSyslog+"=") {
					got = f
				}
			}
			if got != tt.want {
				t.Fatalf("kernel line %q names syslog %q, want %q", kernel, got, tt.want)
			}
		})
	}
}

// A region that refuses or cannot be reached still lets the machine boot the discovery
// environment, and the script says why (one line, nothing iPXE would expand).
func TestEnlistBootsDiscoveryWhenTheRegionFails(t *testing.T) {
	rack := startRack(t, machines{}, regionlinktest.Start(t, "a").URL)
	rack.enlister.err = errors.New("no region: ${evil}\nkernel http://x")
	resp, body := get(t, rack.url+"/ipxe/enlist?mac=52-54-00-aa-bb-cc")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	for _, want := range []string{"echo Ironflow: enlistment not recorded: no region:  {evil} kernel http://x\n", "/boot/discovery/vmlinuz"} {
		if !contains(body, want) {
			t.Fatalf("script lacks %q:\n%s", want, body)
		}
	}
}

// The report exactly as QEMU's iPXE ROM (Debian's ipxe-qemu 1.0.0+git-20190125) sent it for
// `-smbios type=1,uuid=…,serial=…,manufacturer=…,product=…` (TestQEMUUnknownMachineEnlists):
// the SMBIOS strings arrive hex-encoded, "&", "=", "+", "%", "#" and "?" included, and the
// region receives them as the firmware holds them. With uristring, the same iPXE sent
// serial=SN%2042/a&b=c+d%25e%23f%3Fg, which splits at "&" and turns "+" into a space.
func TestEnlistmentReportAsIPXESendsIt(t *testing.T) {
	rack := startRack(t, machines{}, regionlinktest.Start(t, "a").URL)
	const query = "mac=52-54-00-77-00-11&uuid=8d2e6a3c-1b7f-4e0a-9c55-0a1b2c3d4e5f&serial=534e2034322f6126623d632b64256523663f67" +
		"&manufacturer=49726f6e666c6f772054657374202620436f2e&product=5261636b20556e697420312f32202851454d5529&buildarch=i386&platform=pcbios"
	resp, body := get(t, rack.url+"/ipxe/enlist?"+query)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	want := api.BootFacts{MAC: "52:54:00:77:00:11", UUID: "8d2e6a3c-1b7f-4e0a-9c55-0a1b2c3d4e5f", Serial: "SN 42/a&b=c+d%e#f?g",
		Manufacturer: "Ironflow Test & Co.", Product: "Rack Unit 1/2 (QEMU)", BuildArch: "i386", Platform: "pcbios"}
	rack.enlister.mu.Lock()
	defer rack.enlister.mu.Unlock()
	if len(rack.enlister.reports) != 1 || rack.enlister.reports[0].Boot == nil || *rack.enlister.reports[0].Boot != want {
		t.Fatalf("forwarded %+v, want boot facts %+v", rack.enlister.reports, want)
	}
}

// TestScriptsNameTheRackProxy: while the rack serves the machines' HTTP proxy, what it boots
// (a known machine's kernel, the discovery environment) gets its URL on the kernel command
// line, for the address the client reached the rack at; a local boot has no kernel to tell.
func TestScriptsNameTheRackProxy(t *testing.T) {
	lookup := machines{boots: map[string]Boot{
		"52:54:00:ab:cd:01": {BootEnv: "ubuntu", Kernel: "ubuntu/vmlinuz", Cmdline: "console=ttyS0"},
		"52:54:00:00:00:02": {BootEnv: BootEnvLocal},
	}}
	rack := startRackWithConfig(t, func(c *Config) {
		c.ProxyURL = func(host string) string { return "http://" + host + ":8000" }
	}, lookup, regionlinktest.Start(t, "a").URL)
	for path, want := range map[string]string{
		"/ipxe/mac/52-54-00-ab-cd-01.ipxe": "console=ttyS0 ironflow.proxy=http://127.0.0.1:8000\n",
		"/ipxe/mac/52-54-00-aa-bb-cc.ipxe": "ironflow.mode=enlist ironflow.proxy=http://127.0.0.1:8000 ironflow.url=" + rack.url + " BOOTIF=01-52-54-00-aa-bb-cc\n",
	} {
		if _, got := get(t, rack.url+path); !strings.Contains(string(got), want) {
			t.Errorf("%s: no %q in\n%s", path, want, got)
		}
	}
	if _, got := get(t, rack.url+"/ipxe/mac/52-54-00-00-00-02.ipxe"); strings.Contains(string(got), "ironflow.proxy") {
		t.Errorf("a local boot names the proxy:\n%s", got)
	}
}
