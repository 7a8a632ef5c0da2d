// Package netnstest gives tests their own hosts: network namespaces joined by a veth pair,
// removed when the test ends whatever happens, so broadcast traffic never leaves the test.
package netnstest

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/ironflow/ironflow/internal/netns"
)

// TestPrefix begins the name of every namespace this package makes: nothing else uses it, so
// a test can tell other tests' namespaces (go test runs packages side by side) from leaks.
const TestPrefix = "ironflow-test-"

// VethPair creates namespaces "ironflow-test-<tag>s-<pid>" and "ironflow-test-<tag>c-<pid>" joined by
// a veth pair with both ends up, and returns the namespaces and the interface in each. It
// skips the test when not root or when iproute2 is missing. tag keeps packages whose tests
// run at the same time apart; interface names stay within the kernel's 15 characters.
func VethPair(t *testing.T, tag string) (srvNS, srvIf, cliNS, cliIf string) {
	t.Helper()
	id := os.Getpid()
	srvNS, cliNS = Namespace(t, tag+"s"), Namespace(t, tag+"c")
	srvIf, cliIf = fmt.Sprintf("if%ss%d", tag, id), fmt.Sprintf("if%sc%d", tag, id)
	IP(t, "link", "add", srvIf, "netns", srvNS, "type", "veth", "peer", "name", cliIf, "netns", cliNS)
	IP(t, "-n", srvNS, "link", "set", srvIf, "up")
	IP(t, "-n", cliNS, "link", "set", cliIf, "up")
	return srvNS, srvIf, cliNS, cliIf
}

// Namespace creates the network namespace "ironflow-test-<tag>-<pid>" (TestPrefix), removed
// when the test ends, and returns its name. It skips the test when not root or when iproute2
// is missing.
func Namespace(t *testing.T, tag string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("skipping: the ip command (iproute2) is not installed")
	}
	ns := fmt.Sprintf("%s%s-%d", TestPrefix, tag, os.Getpid())
	IP(t, "netns", "add", ns)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", ns, err, out)
		}
	})
	return ns
}

// IP runs the ip command and fails the test when it fails.
func IP(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %v: %v: %s", args, err, out)
	}
}

// Run runs fn on an OS thread that joined namespace ns, so the sockets fn opens belong to ns.
// The thread stays locked and dies with its goroutine: nothing else ever runs in ns.
func Run(t *testing.T, ns string, fn func() error) {
	t.Helper()
	if err := <-Start(ns, fn); err != nil {
		t.Fatalf("in netns %s: %v", ns, err)
	}
}

// Start is Run without the wait, for an fn that serves until its caller stops it (a rack
// opening its sockets in ns): the channel gets fn's error. Goroutines fn starts run in the
// test's own namespace, so they reach its loopback.
func Start(ns string, fn func() error) <-chan error { return netns.Start(ns, fn) }
