// Package inventory gathers the hardware inventory of the running system for enlistment:
// network interfaces and their MACs, CPU, memory, disks, SMBIOS from /sys/class/dmi/id where
// readable, and the BMC address from `ipmitool lan print` where ipmitool is installed, else
// in-band through /dev/ipmi0 (the discovery image has no ipmitool).
// Everything it reports is cleaned and bounded to what the region accepts (region/api/enlist.go).
package inventory

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	ipmiclient "github.com/bougou/go-ipmi/pkg/client"
	"github.com/bougou/go-ipmi/pkg/types"

	"github.com/ironflow/ironflow/region/api"
)

// Options say where to look; zero fields take the running system's.
type Options struct {
	Root     string // prefix of /proc and /sys (tests); default "/"
	IPMITool string // the ipmitool command; default "ipmitool" from PATH, absent = no BMC
	// Interfaces lists the network interfaces; default net.Interfaces.
	Interfaces func() ([]net.Interface, error)
}

// maxAddrs is how many addresses of one interface are reported.
const maxAddrs = 16

// Gather reads the inventory; parts the system does not show are left empty. Only a failure
// to list the network interfaces, without which no machine can be matched, is an error.
func Gather(ctx context.Context, o Options) (api.Inventory, error) {
	if o.Root == "" {
		o.Root = "/"
	}
	if o.IPMITool == "" {
		o.IPMITool = "ipmitool"
	}
	if o.Interfaces == nil {
		o.Interfaces = net.Interfaces
	}
	host, _ := os.Hostname()
	inv := api.Inventory{Hostname: clean(host), Arch: runtime.GOARCH, Interfaces: []api.NetInterface{}, Disks: []api.Disk{}}
	var err error
	if inv.Interfaces, err = interfaces(o); err != nil {
		return api.Inventory{}, err
	}
	inv.CPU = cpu(o.Root)
	inv.MemoryMiB = memoryMiB(o.Root)
	inv.Disks = disks(o.Root)
	inv.SMBIOS = smbios(o.Root)
	if inv.BMCAddress = bmcAddress(ctx, o.IPMITool); inv.BMCAddress == "" {
		inv.BMCAddress = inbandBMCAddress(ctx, o.Root)
	}
	return inv, nil
}

// clean makes a value the region accepts: printable, trimmed, at most api.MaxEnlistValue bytes.
func clean(s string) string {
	s = strings.TrimSpace(strings.Map(func(r rune) rune {
		if !unicode.IsPrint(r) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, "")))
	if len(s) > api.MaxEnlistValue {
		s = strings.ToValidUTF8(s[:api.MaxEnlistValue], "") // drops a rune cut in half
	}
	return s
}

// readValue reads a one-line sysfs or procfs file, "" when unreadable.
func readValue(root string, parts ...string) string {
	b, err := os.ReadFile(filepath.Join(append([]string{root}, parts...)...))
	if err != nil {
		return ""
	}
	return clean(string(b))
}

// interfaces lists the interfaces with an Ethernet MAC, those backed by a device (physical
// NICs) first, at most api.MaxEnlistMACs.
func interfaces(o Options) ([]api.NetInterface, error) {
	ifs, err := o.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("list network interfaces: %w", err)
	}
	type candidate struct {
		ifc      api.NetInterface
		physical bool
	}
	var cands []candidate
	for _, ifi := range ifs {
		if len(ifi.HardwareAddr) != 6 || ifi.Flags&net.FlagLoopback != 0 || isZero(ifi.HardwareAddr) {
			continue
		}
		ifc := api.NetInterface{Name: clean(ifi.Name), MAC: ifi.HardwareAddr.String(), Addrs: []string{}}
		if addrs, err := ifi.Addrs(); err == nil {
			for _, a := range addrs {
				if p, err := netip.ParsePrefix(a.String()); err == nil && len(ifc.Addrs) < maxAddrs {
					ifc.Addrs = append(ifc.Addrs, p.String())
				}
			}
		}
		_, err := os.Stat(filepath.Join(o.Root, "sys/class/net", ifi.Name, "device"))
		cands = append(cands, candidate{ifc, err == nil})
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].physical && !cands[j].physical })
	out := []api.NetInterface{}
	seen := map[string]bool{}
	for _, c := range cands {
		if len(out) == api.MaxEnlistMACs {
			break
		}
		if !seen[c.ifc.MAC] { // bonds and VLANs share their parent's MAC
			seen[c.ifc.MAC] = true
			out = append(out, c.ifc)
		}
	}
	return out, nil
}

func isZero(mac net.HardwareAddr) bool { return bytes.Equal(mac, make(net.HardwareAddr, len(mac))) }

// cpu reads the model and the number of logical CPUs from /proc/cpuinfo.
func cpu(root string) api.CPU {
	c := api.CPU{Count: runtime.NumCPU()}
	f, err := os.Open(filepath.Join(root, "proc/cpuinfo"))
	if err != nil {
		return c
	}
	defer f.Close()
	count := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(key) {
		case "processor":
			count++
		case "model name", "Model", "cpu model":
			if c.Model == "" {
				c.Model = clean(value)
			}
		}
	}
	if count > 0 {
		c.Count = count
	}
	return c
}

// memoryMiB reads MemTotal from /proc/meminfo.
func memoryMiB(root string) int64 {
	f, err := os.Open(filepath.Join(root, "proc/meminfo"))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err == nil {
				return kb / 1024
			}
		}
	}
	return 0
}

// virtualDisks are block devices that are not disks.
var virtualDisks = []string{"loop", "ram", "zram", "dm-", "md", "sr", "nbd"}

// disks lists the block devices of /sys/block with a size, at most api.MaxEnlistMACs.
func disks(root string) []api.Disk {
	out := []api.Disk{}
	entries, err := os.ReadDir(filepath.Join(root, "sys/block"))
	if err != nil {
		return out
	}
	for _, e := range entries {
		name := e.Name()
		if len(out) == api.MaxEnlistMACs || hasAnyPrefix(name, virtualDisks) {
			continue
		}
		sectors, err := strconv.ParseInt(readValue(root, "sys/block", name, "size"), 10, 64)
		if err != nil || sectors <= 0 {
			continue
		}
		out = append(out, api.Disk{Name: clean(name), SizeBytes: sectors * 512, Model: readValue(root, "sys/block", name, "device/model"),
			Serial: diskSerial(root, name)})
	}
	return out
}

// diskSerial is the disk's serial as its driver shows it: NVMe under device/, virtio disks
// beside it, SCSI and SATA disks in their unit serial number page (VPD page 0x80: a 4-byte
// header, then the serial).
func diskSerial(root, name string) string {
	for _, f := range []string{"device/serial", "serial"} {
		if v := readValue(root, "sys/block", name, f); v != "" {
			return v
		}
	}
	if page, err := os.ReadFile(filepath.Join(root, "sys/block", name, "device/vpd_pg80")); err == nil && len(page) > 4 {
		return clean(string(page[4:]))
	}
	return ""
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// smbios reads /sys/class/dmi/id; the serial and UUID need root to read.
func smbios(root string) api.SMBIOS {
	dmi := func(f string) string { return readValue(root, "sys/class/dmi/id", f) }
	return api.SMBIOS{Manufacturer: dmi("sys_vendor"), Product: dmi("product_name"), Serial: dmi("product_serial"),
		UUID: dmi("product_uuid"), BIOSVendor: dmi("bios_vendor"), BIOSVersion: dmi("bios_version")}
}

// ipmiTimeout bounds `ipmitool lan print`, which can hang on a wedged BMC.
const ipmiTimeout = 20 * time.Second

// bmcAddress runs `ipmitool lan print` and returns its "IP Address", "" when ipmitool is
// absent, fails, or reports no usable address.
func bmcAddress(ctx context.Context, tool string) string {
	path, err := exec.LookPath(tool)
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, ipmiTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "lan", "print").Output()
	if err != nil {
		return ""
	}
	return parseLANPrint(out)
}

// lanChannels are the IPMI channels a BMC may have its LAN on (1 on most, up to 11).
const lanChannels = 11

// inbandBMCAddress asks the BMC through this host's own IPMI interface (/dev/ipmi0, from the
// kernel's ipmi_si and ipmi_devintf) for the IP address of the first LAN channel that has one;
// "" without the device or an address.
func inbandBMCAddress(ctx context.Context, root string) string {
	if _, err := os.Stat(filepath.Join(root, "dev/ipmi0")); err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, ipmiTimeout)
	defer cancel()
	c, err := ipmiclient.NewOpenClient()
	if err != nil {
		return ""
	}
	if err := c.Connect(ctx); err != nil {
		return ""
	}
	defer c.Close(ctx)
	for ch := uint8(1); ch <= lanChannels && ctx.Err() == nil; ch++ {
		ip := &types.LanConfigParam_IP{}
		if err := c.GetLanConfigParamFor(ctx, ch, ip); err != nil {
			continue // not a LAN channel
		}
		if a, ok := netip.AddrFromSlice(ip.IP.To4()); ok && !a.IsUnspecified() {
			return a.String()
		}
	}
	return ""
}

// parseLANPrint finds the "IP Address : a.b.c.d" line of `ipmitool lan print`.
func parseLANPrint(out []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(key) != "IP Address" {
			continue
		}
		a, err := netip.ParseAddr(strings.TrimSpace(value))
		if err != nil || a.IsUnspecified() {
			return ""
		}
		return a.String()
	}
	return ""
}
