package pods

import (
	"strings"
	"testing"

	"libvirt.org/go/libvirtxml"
)

// guests is the guest part of a capabilities document: one hvm guest per arch with its domain types.
func guests(t *testing.T, doc string) libvirtxml.Caps {
	t.Helper()
	var caps libvirtxml.Caps
	if err := caps.Unmarshal("<capabilities><host><cpu><arch>x</arch></cpu></host>" + doc + "</capabilities>"); err != nil {
		t.Fatal(err)
	}
	return caps
}

// Pods of other architectures: an ARM64 host with KVM, a ppc64le host with KVM and TCG for
// x86_64 too. The documents are hand-written in libvirt's capabilities format (no such host here).
func TestGuestDomainTypeFollowsThePodsCapabilities(t *testing.T) {
	arm := guests(t, `<guest><os_type>hvm</os_type><arch name='aarch64'><domain type='qemu'/><domain type='kvm'/></arch></guest>`)
	ppc := guests(t, `<guest><os_type>hvm</os_type><arch name='ppc64le'><domain type='qemu'/><domain type='kvm'/></arch></guest>
		<guest><os_type>hvm</os_type><arch name='x86_64'><domain type='qemu'/></arch></guest>`)
	for _, c := range []struct {
		caps       libvirtxml.Caps
		arch, want string
	}{
		{arm, "aarch64", "kvm"},
		{ppc, "ppc64le", "kvm"},
		{ppc, "x86_64", "qemu"},
	} {
		got, err := guestDomainType(c.caps, c.arch)
		if err != nil || got != c.want {
			t.Errorf("%s: %q, %v; want %q", c.arch, got, err, c.want)
		}
	}
	if _, err := guestDomainType(arm, "x86_64"); err == nil || !strings.Contains(err.Error(), `cannot run architecture "x86_64" (it runs [aarch64])`) {
		t.Errorf("x86_64 on an ARM64 pod: %v", err)
	}
}
