package httpboot

import (
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ironflow/ironflow/rack/bootfs"
	"github.com/ironflow/ironflow/rack/regionlink"

	"github.com/ironflow/ironflow/rack/regionlink/regionlinktest"
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
		{"unknown enlists", "/ipxe/mac/52-54-00-aa-bb-cc.ipxe", 200, []string{"discovery for 52:54:00:aa:bb:cc",
			"kernel " + base + "/boot/discovery/vmlinuz initrd=initrd.img console=ttyS0 ironflow.mode=enlist\n",
			"initrd " + base + "/boot/discovery/initrd.img\n"}},
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
		return Config{Dir: d, Machines: machines{}, Discovery: discovery, Region: link, Registry: prometheus.NewRegistry()}
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
