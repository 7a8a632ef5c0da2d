// Package pods drives KVM pods: libvirt hypervisors reached over libvirt's RPC protocol (no cgo,
// no virsh). It discovers what a pod has, composes VMs from its storage pools and decomposes
// them. The rack runs it, so a pod is reached on the rack's own network.
package pods

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/digitalocean/go-libvirt"
	"github.com/digitalocean/go-libvirt/socket/dialers"
)

// Conn is one connection to a pod's libvirt daemon (the qemu:///system driver).
//
// go-libvirt's calls take no context and wait for libvirt's answer forever: a daemon that
// accepts the connection but stops answering (hung, or its host gone without a reset) would
// hang the rack. So every operation runs under a watchdog that closes the connection when
// libvirt sends nothing for the timeout, which ends the pending call with an error; the
// connection stays closed after that.
type Conn struct {
	lv             *libvirt.Libvirt
	addr           string // where the daemon is, for errors
	watch          *watchdog
	closeTransport func() error          // what carries the connection besides its socket (an SSH client), or nil
	redial         func() (*Conn, error) // to undo what an operation did after the connection broke
}

// DialUnix connects to the libvirt daemon listening on the unix socket at path. timeout bounds
// the dial and every later call: libvirt must answer within it.
func DialUnix(path string, timeout time.Duration) (*Conn, error) {
	nc, err := net.DialTimeout("unix", path, timeout)
	if err != nil {
		return nil, fmt.Errorf("connect to libvirt at %s: %w", path, err)
	}
	return connect(nc, path, timeout, nil, func() (*Conn, error) { return DialUnix(path, timeout) })
}

// connect opens libvirt's qemu:///system driver on nc, a connection to the daemon at addr.
// closeTransport closes what carries nc besides itself (or is nil); it is called once the
// connection fails or is closed. redial makes a new connection to the same daemon.
func connect(nc net.Conn, addr string, timeout time.Duration, closeTransport func() error, redial func() (*Conn, error)) (*Conn, error) {
	w := &watchdog{timeout: timeout, abort: func() {
		nc.Close()
		if closeTransport != nil {
			closeTransport()
		}
	}}
	c := &Conn{lv: libvirt.NewWithDialer(dialers.NewAlreadyConnected(watchedConn{nc, w})), addr: addr, watch: w, closeTransport: closeTransport, redial: redial}
	if err := c.do(func() error { return c.lv.ConnectToURI(libvirt.QEMUSystem) }); err != nil {
		broken := w.broken()
		w.kill()
		if broken {
			return nil, fmt.Errorf("connect: %w", err) // which names the daemon
		}
		return nil, fmt.Errorf("connect to libvirt at %s: %w", addr, err)
	}
	return c, nil
}

// Close ends the connection.
func (c *Conn) Close() error {
	if c.watch.killed() {
		return nil // closed when libvirt did not answer
	}
	err := c.do(c.lv.Disconnect)
	if err != nil {
		c.watch.kill()
		return fmt.Errorf("disconnect from libvirt: %w", err)
	}
	if c.closeTransport != nil {
		if err := c.closeTransport(); err != nil {
			return fmt.Errorf("disconnect from libvirt: %w", err)
		}
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

// do runs op, one operation on the connection, under the watchdog, and says so when the
// connection broke under it.
func (c *Conn) do(op func() error) error {
	if c.watch.killed() {
		return fmt.Errorf("libvirt at %s: the connection was closed after libvirt did not answer within %s", c.addr, c.watch.timeout)
	}
	c.watch.start()
	err := op()
	expired, lost := c.watch.stop()
	switch {
	case expired && err != nil:
		return fmt.Errorf("libvirt at %s did not answer within %s (connection closed): %w", c.addr, c.watch.timeout, err)
	case err != nil && lost:
		// libvirtd exited or restarted: what it did with the call is unknown.
		return fmt.Errorf("libvirt at %s closed the connection: %w", c.addr, err)
	}
	return err
}

// bounded is do for an operation with a result.
func bounded[T any](c *Conn, op func() (T, error)) (T, error) {
	var v T
	err := c.do(func() (err error) {
		v, err = op()
		return err
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

// watchdog closes a connection whose daemon sends nothing for timeout while an operation waits.
type watchdog struct {
	timeout time.Duration
	abort   func() // closes the connection and its transport

	mu      sync.Mutex
	timer   *time.Timer // while an operation runs
	expired bool        // the timer fired: the connection is closed
	lost    bool        // reading from or writing to the daemon failed: the connection is gone
	closing bool        // go-libvirt closes the connection: what fails then is not the daemon's doing
	once    sync.Once   // of abort
}

func (w *watchdog) start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timer = time.AfterFunc(w.timeout, func() {
		w.mu.Lock()
		w.expired = true
		w.mu.Unlock()
		w.kill()
	})
}

// stop ends an operation's watch and reports whether its timer fired and whether the
// connection was lost meanwhile.
func (w *watchdog) stop() (expired, lost bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timer.Stop()
	w.timer = nil
	return w.expired, w.lost
}

// answered restarts the running operation's timer: the daemon sent something.
func (w *watchdog) answered() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil && !w.expired {
		w.timer.Reset(w.timeout)
	}
}

func (w *watchdog) connLost() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lost = w.lost || !w.closing
}

func (w *watchdog) closed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closing = true
}

func (w *watchdog) kill() { w.once.Do(w.abort) }

// broken reports whether the connection is gone: it expired or was lost.
func (w *watchdog) broken() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.expired || w.lost
}

// killed reports whether the watchdog closed the connection.
func (w *watchdog) killed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.expired
}

// watchedConn tells the watchdog of what the daemon sends. go-libvirt reads the connection in
// one goroutine for as long as it is open.
type watchedConn struct {
	net.Conn
	w *watchdog
}

// Write notes a failed write too: the reader may learn that the daemon is gone only after the
// writer did.
func (c watchedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err != nil {
		c.w.connLost()
	}
	return n, err
}

// Close is go-libvirt's: on Disconnect, and when a connect fails.
func (c watchedConn) Close() error {
	c.w.closed()
	return c.Conn.Close()
}

func (c watchedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.w.answered()
	}
	if err != nil {
		c.w.connLost()
	}
	return n, err
}

// isNotFound reports whether err is libvirt's answer for a missing object of the given kind.
func isNotFound(err error, code libvirt.ErrorNumber) bool {
	var lerr libvirt.Error
	return errors.As(err, &lerr) && lerr.Code == uint32(code)
}
