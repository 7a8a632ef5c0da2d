package dev

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/internal/netns"
)

// TestTeardownRemovesTheRackLinksOfACrashedStack: the links a stack made and never removed
// (it was killed) are found from the state dir alone and removed by the teardown, veth pairs
// included.
func TestTeardownRemovesTheRackLinksOfACrashedStack(t *testing.T) {
	if off := rackLinksOff(); off != "" {
		t.Skip(off)
	}
	stateDir := t.TempDir()
	var links []RackLink
	for i := range RegionNames {
		l := rackLinkNames(stateDir, i)
		links = append(links, l)
		t.Cleanup(func() { _ = removeRackLinks(stateDir) })
		if err := createRackLink(l); err != nil {
			t.Fatal(err)
		}
	}
	if err := Teardown(stateDir); err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		for _, ns := range []string{l.Netns, l.MachinesNetns} {
			if _, err := os.Stat(filepath.Join(netns.Dir, ns)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("namespace %s left after the teardown: %v", ns, err)
			}
		}
		for _, ifname := range []string{l.Interface, l.MachinesInterface} {
			// Every namespace's links: a veth end moved elsewhere would show there.
			if out, _ := exec.Command("ip", "-all", "netns", "exec", "ip", "-o", "link", "show").CombinedOutput(); strings.Contains(string(out), ifname+"@") {
				t.Errorf("interface %s left after the teardown:\n%s", ifname, out)
			}
			if err := exec.Command("ip", "link", "show", "dev", ifname).Run(); err == nil {
				t.Errorf("interface %s left in the host's namespace", ifname)
			}
		}
	}
}

// TestRackLinkNamesFitTheKernel: interface names within 15 characters, and every stack's
// names its own.
func TestRackLinkNamesFitTheKernel(t *testing.T) {
	seen := map[string]bool{}
	for _, dir := range []string{"/home/op/ironflow/.ironflow-dev", "/tmp/ironflow-dev-123"} {
		for i := range RegionNames {
			l := rackLinkNames(dir, i)
			for _, name := range []string{l.Netns, l.MachinesNetns, l.Interface, l.MachinesInterface} {
				if seen[name] {
					t.Errorf("%s named twice", name)
				}
				seen[name] = true
			}
			for _, ifname := range []string{l.Interface, l.MachinesInterface} {
				if len(ifname) > 15 {
					t.Errorf("interface name %s is longer than 15 characters", ifname)
				}
			}
			if !rackSubnet(i).Contains(l.Address.Addr()) || l.Address.Bits() != 24 {
				t.Errorf("rack %d's address %s is not in its subnet %s", i, l.Address, rackSubnet(i))
			}
		}
	}
}
