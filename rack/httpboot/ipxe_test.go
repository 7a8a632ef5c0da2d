package httpboot

import (
	"errors"
	"net/http"
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
			"chain --replace " + base + "/ipxe/enlist?mac=${netX/mac:hexhyp}&uuid=${uuid}&serial=${serial:uristring}&manufacturer=${manufacturer:uristring}" +
				"&product=${product:uristring}&buildarch=${buildarch:uristring}&platform=${platform:uristring} || goto discovery\n:discovery\n",
			"kernel " + base + "/boot/discovery/vmlinuz initrd=initrd.img console=ttyS0 ironflow.mode=enlist ironflow.url=" + base + "\n",
			"initrd " + base + "/boot/discovery/initrd.img\n"}},
		{"enlistment report", "/ipxe/enlist?mac=52-54-00-aa-bb-cc&uuid=4c4c4544-0042-3510-8051-b7c04f4e3732&serial=CZ%201234" +
			"&manufacturer=Dell%20Inc.&product=PowerEdge%20R640&buildarch=x86_64&platform=efi", 200, []string{
			"# Ironflow: enlisting machine 52:54:00:aa:bb:cc, boot env discovery\n", "echo Ironflow: enlisted as new machine new-1\n",
			"kernel " + base + "/boot/discovery/vmlinuz initrd=initrd.img console=ttyS0 ironflow.mode=enlist ironflow.url=" + base + "\n"}},
		{"enlistment report without a MAC", "/ipxe/enlist?uuid=4c4c4544-0042-3510-8051-b7c04f4e3732", 400, nil},
		{"enlistment report, unknown parameter", "/ipxe/enlist?mac=52-54-00-aa-bb-cc&x=1", 400, nil},
		{"enlistment report, parameter twice", "/ipxe/enlist?mac=52-54-00-aa-bb-cc&serial=a&serial=b", 400, nil},
		{"enlistment report, control character", "/ipxe/enlist?mac=52-54-00-aa-bb-cc&product=a%0Akernel%20evil", 400, nil},
		{"enlistment report, too long", "/ipxe/enlist?mac=52-54-00-aa-bb-cc&serial=" + strings.Repeat("x", api.MaxEnlistValue+1), 400, nil},
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
