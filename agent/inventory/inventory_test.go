package inventory

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/region/api"
)

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func mac(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

// A system's files as a real server shows them: physical NICs first, virtual block devices
// and loopback left out, SMBIOS values cleaned and bounded, the BMC from ipmitool.
func TestGatherReadsTheSystem(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"proc/cpuinfo":                     "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Gold 6230\nprocessor\t: 1\nmodel name\t: Intel(R) Xeon(R) Gold 6230\n",
		"proc/meminfo":                     "MemTotal:       16318588 kB\nMemFree:  1 kB\n",
		"sys/block/sda/size":               "1953525168\n",
		"sys/block/sda/device/model":       "SAMSUNG MZ7LH960\n",
		"sys/block/sda/device/vpd_pg80":    "\x00\x80\x00\x0e  S4EMNX0R1234\x00",
		"sys/block/vda/size":               "2097152\n",
		"sys/block/vda/serial":             "ironflow-disk-1\n",
		"sys/block/nvme0n1/size":           "4096\n",
		"sys/block/nvme0n1/device/model":   "Samsung SSD 980\n",
		"sys/block/nvme0n1/device/serial":  "S649NF0R5678  \n",
		"sys/block/loop0/size":             "100\n",
		"sys/block/sr0/size":               "0\n",
		"sys/class/net/eno1/device/vendor": "0x8086\n",
		"sys/class/dmi/id/sys_vendor":      "Dell Inc.\n",
		"sys/class/dmi/id/product_name":    "PowerEdge R640\x1b[2J" + strings.Repeat("x", 200) + "\n",
		"sys/class/dmi/id/product_serial":  "CZ1234\n",
		"sys/class/dmi/id/product_uuid":    "4c4c4544-0042-3510-8051-b7c04f4e3732\n",
	})
	tools := t.TempDir()
	writeFiles(t, tools, map[string]string{"ipmitool": "#!/bin/sh\n[ \"$1 $2\" = \"lan print\" ] || exit 1\n" +
		"echo 'IP Address Source       : Static Address'\necho 'IP Address              : 10.20.0.7'\necho 'MAC Address             : aa:bb:cc:00:00:01'\n"})
	ifs := []net.Interface{
		{Index: 1, Name: "lo", Flags: net.FlagLoopback | net.FlagUp, HardwareAddr: nil},
		{Index: 9001, Name: "veth0", HardwareAddr: mac("02:00:00:00:00:09")},
		{Index: 9002, Name: "eno1", HardwareAddr: mac("52:54:00:00:00:01")},
		{Index: 9003, Name: "bond0.10", HardwareAddr: mac("52:54:00:00:00:01")},
		{Index: 9004, Name: "ib0", HardwareAddr: make(net.HardwareAddr, 20)},
	}
	inv, err := Gather(context.Background(), Options{Root: root, IPMITool: filepath.Join(tools, "ipmitool"),
		Interfaces: func() ([]net.Interface, error) { return ifs, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Interfaces) != 2 || inv.Interfaces[0].Name != "eno1" || inv.Interfaces[1].MAC != "02:00:00:00:00:09" {
		t.Errorf("interfaces %+v: want eno1 (physical) then veth0, the bond sharing eno1's MAC and ib0 left out", inv.Interfaces)
	}
	if inv.CPU.Count != 2 || inv.CPU.Model != "Intel(R) Xeon(R) Gold 6230" || inv.MemoryMiB != 15936 {
		t.Errorf("CPU %+v, memory %d MiB", inv.CPU, inv.MemoryMiB)
	}
	wantDisks := []api.Disk{ // as /sys/block lists them
		{Name: "nvme0n1", SizeBytes: 4096 * 512, Model: "Samsung SSD 980", Serial: "S649NF0R5678"},
		{Name: "sda", SizeBytes: 1953525168 * 512, Model: "SAMSUNG MZ7LH960", Serial: "S4EMNX0R1234"},
		{Name: "vda", SizeBytes: 2097152 * 512, Serial: "ironflow-disk-1"},
	}
	if !slices.Equal(inv.Disks, wantDisks) {
		t.Errorf("disks %+v, want %+v", inv.Disks, wantDisks)
	}
	s := inv.SMBIOS
	if s.Manufacturer != "Dell Inc." || s.Serial != "CZ1234" || s.UUID != "4c4c4544-0042-3510-8051-b7c04f4e3732" ||
		!strings.HasPrefix(s.Product, "PowerEdge R640[2J") || len(s.Product) != api.MaxEnlistValue {
		t.Errorf("SMBIOS %+v", s)
	}
	if inv.BMCAddress != "10.20.0.7" {
		t.Errorf("BMC address %q", inv.BMCAddress)
	}
}

// Without ipmitool, or with a BMC that reports no address, there is no BMC address.
func TestNoBMCAddress(t *testing.T) {
	if got := bmcAddress(context.Background(), filepath.Join(t.TempDir(), "ipmitool")); got != "" {
		t.Errorf("missing ipmitool: %q", got)
	}
	if got := parseLANPrint([]byte("IP Address              : 0.0.0.0\n")); got != "" {
		t.Errorf("unset BMC address: %q", got)
	}
}
