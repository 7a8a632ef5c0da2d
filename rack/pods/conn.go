// Package pods drives KVM pods: libvirt hypervisors reached over libvirt's RPC protocol (no cgo,
// no virsh). It discovers what a pod has, composes VMs from its storage pools and decomposes
// them. The rack runs it, so a pod is reached on the rack's own network.
package pods

import (
	"errors"
	"fmt"
	"time"

	"github.com/digitalocean/go-libvirt"
	"github.com/digitalocean/go-libvirt/socket/dialers"
)

// Conn is one connection to a pod's libvirt daemon (the qemu:///system driver).
type Conn struct {
	lv             *libvirt.Libvirt
	closeTransport func() error // what carries the connection besides its socket (an SSH client), or nil
}

// DialUnix connects to the libvirt daemon listening on the unix socket at path.
func DialUnix(path string, timeout time.Duration) (*Conn, error) {
	lv := libvirt.NewWithDialer(dialers.NewLocal(dialers.WithSocket(path), dialers.WithLocalTimeout(timeout)))
	if err := lv.ConnectToURI(libvirt.QEMUSystem); err != nil {
		return nil, fmt.Errorf("connect to libvirt at %s: %w", path, err)
	}
	return &Conn{lv: lv}, nil
}

// Close ends the connection.
func (c *Conn) Close() error {
	err := c.lv.Disconnect()
	if c.closeTransport != nil {
		err = errors.Join(err, c.closeTransport())
	}
	if err != nil {
		return fmt.Errorf("disconnect from libvirt: %w", err)
	}
	return nil
}

// ErrRefused marks what the request or the pod makes impossible: a bad request, a pool
// without room, an architecture the pod cannot run, a name another domain has, a pod address
// that cannot be reached this way, a wrong host key. Retrying the same call cannot succeed.
var ErrRefused = errors.New("refused")

// refusedError is an error marked ErrRefused; its message is the cause's.
type refusedError struct{ err error }

func (e refusedError) Error() string   { return e.err.Error() }
func (e refusedError) Unwrap() []error { return []error{e.err, ErrRefused} }

func refuse(err error) error { return refusedError{err} }

// isNotFound reports whether err is libvirt's answer for a missing object of the given kind.
func isNotFound(err error, code libvirt.ErrorNumber) bool {
	var lerr libvirt.Error
	return errors.As(err, &lerr) && lerr.Code == uint32(code)
}
