package pods

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/dev/sshdtest"
	"github.com/ironflow/ironflow/region/api"
)

// Addresses the rack cannot use are refused for good (ErrRefused), before anything is dialled.
func TestDialerRefusesAddressesItCannotUse(t *testing.T) {
	hostKey := sshdtest.AuthorizedLine(sshdtest.NewSigner(t), "host")
	withKey := Dialer{SSHKey: sshdtest.NewSigner(t), Timeout: time.Second}
	for _, c := range []struct {
		what string
		d    Dialer
		pod  api.Pod
		want string
	}{
		{"another driver", withKey, api.Pod{Name: "p", PowerAddress: "xen:///system"}, "want qemu:///system or qemu+ssh://"},
		{"a session daemon", withKey, api.Pod{Name: "p", PowerAddress: "qemu:///session"}, "want qemu:///system"},
		{"ssh without a host", withKey, api.Pod{Name: "p", PowerAddress: "qemu+ssh:///system", HostKey: hostKey}, "want qemu:///system"},
		{"no rack key", Dialer{}, api.Pod{Name: "p", PowerAddress: "qemu+ssh://root@127.0.0.1/system", HostKey: hostKey}, "the rack has no SSH key"},
		{"no host key", withKey, api.Pod{Name: "p", PowerAddress: "qemu+ssh://root@127.0.0.1/system"}, "records no HostKey"},
		{"a bad host key", withKey, api.Pod{Name: "p", PowerAddress: "qemu+ssh://root@127.0.0.1:1/system", HostKey: "nope"}, "recorded host key"},
	} {
		conn, err := c.d.Dial(c.pod)
		if err == nil {
			conn.Close()
		}
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a refusal with %q", c.what, err, c.want)
		}
	}
}

// The SSH side of a qemu+ssh address: user (root by default), port (22 by default), socket.
func TestDialerReadsQemuSSHAddresses(t *testing.T) {
	d := Dialer{SSHKey: sshdtest.NewSigner(t)}
	for _, c := range []struct{ address, addr, user, socket string }{
		{"qemu+ssh://kvm-01/system", "kvm-01:22", "root", DefaultSocket},
		{"qemu+ssh://admin@10.0.0.5:2222/system?socket=/run/x.sock", "10.0.0.5:2222", "admin", "/run/x.sock"},
	} {
		pod := api.Pod{Name: "p", PowerAddress: c.address, HostKey: "ssh-ed25519 AAAA"}
		u, err := parseAddress(pod)
		if err != nil {
			t.Fatal(err)
		}
		s, err := d.ssh(pod, u, socketOf(u))
		if err != nil || s.Addr != c.addr || s.User != c.user || s.Socket != c.socket {
			t.Errorf("%s: %+v, %v", c.address, s, err)
		}
	}
}
