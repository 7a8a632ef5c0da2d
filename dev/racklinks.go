package dev

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/ironflow/ironflow/internal/netns"
)

// RackLink is the link a dev rack serves broadcast DHCP on: a veth pair whose rack end, with
// the gateway address of the rack's seeded subnet, is in a network namespace of the rack's
// own and whose other end is in a namespace for the rack's machines, where a DHCP client
// (`ip netns exec MACHINES dhclient IF`) gets the rack's leases.
type RackLink struct {
	Netns             string       // holds the rack's end
	Interface         string       // the rack's end
	Address           netip.Prefix // the rack end's address: its subnet's gateway
	MachinesNetns     string       // holds the machines' end
	MachinesInterface string
}

// rackSubnet is the network of the i-th region's rack, 10.4<2+i>.0.0/24; its gateway, .1, is
// the rack's address on its link.
func rackSubnet(i int) netip.Prefix {
	return netip.MustParsePrefix(fmt.Sprintf("10.4%d.0.0/24", 2+i))
}

// rackLinkNames names the link of the i-th region's rack for stateDir: after a crash the
// next start or teardown on the same state dir finds what is left from the names alone, and
// stacks on other state dirs have names of their own. Interface names stay within the
// kernel's 15 characters.
func rackLinkNames(stateDir string, i int) RackLink {
	id := stateDirID(stateDir)
	ns := RackLinkNetnsPrefix(stateDir) + RackNames[RegionNames[i]]
	gateway := rackSubnet(i).Addr().Next()
	return RackLink{
		Netns: ns, Interface: fmt.Sprintf("dv%sr%d", id, i),
		Address:       netip.PrefixFrom(gateway, rackSubnet(i).Bits()),
		MachinesNetns: ns + "-machines", MachinesInterface: fmt.Sprintf("dv%sm%d", id, i),
	}
}

// stateDirID tells the rack links of stacks on different state dirs apart.
func stateDirID(stateDir string) string {
	sum := sha256.Sum256([]byte(stateDir))
	return hex.EncodeToString(sum[:3])
}

// RackLinkNetnsPrefix begins the name of every network namespace of the rack links of the
// stack on stateDir (an absolute path), and of no other stack's.
func RackLinkNetnsPrefix(stateDir string) string {
	return "ironflow-dev-" + stateDirID(stateDir) + "-"
}

// rackLinksOff says why this host cannot have rack links, "" when it can: they need root
// and iproute2's ip netns.
func rackLinksOff() string {
	if os.Geteuid() != 0 {
		return "not root: the rack's DHCP on a link needs network namespaces"
	}
	if out, err := exec.Command("ip", "netns", "list").CombinedOutput(); err != nil {
		return fmt.Sprintf("ip netns does not work here (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	return ""
}

// createRackLink makes the namespaces and the veth pair of l, both ends up, the rack's with
// its address. What it made before a failure is left for removeRackLinks.
func createRackLink(l RackLink) error {
	for _, args := range [][]string{
		{"netns", "add", l.Netns},
		{"netns", "add", l.MachinesNetns},
		{"link", "add", l.Interface, "netns", l.Netns, "type", "veth", "peer", "name", l.MachinesInterface, "netns", l.MachinesNetns},
		{"-n", l.Netns, "addr", "add", l.Address.String(), "dev", l.Interface},
		{"-n", l.Netns, "link", "set", l.Interface, "up"},
		{"-n", l.MachinesNetns, "link", "set", l.MachinesInterface, "up"},
	} {
		if err := ip(args...); err != nil {
			return fmt.Errorf("rack link %s: %w", l.Netns, err)
		}
	}
	return nil
}

// removeRackLinks deletes the namespaces of stateDir's rack links that exist, which deletes
// the veth pairs with them.
func removeRackLinks(stateDir string) error {
	var errs []error
	for i := range RegionNames {
		l := rackLinkNames(stateDir, i)
		for _, ns := range []string{l.Netns, l.MachinesNetns} {
			if _, err := os.Stat(filepath.Join(netns.Dir, ns)); errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err := ip("netns", "del", ns); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func ip(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
