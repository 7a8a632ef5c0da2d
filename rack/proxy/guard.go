package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"syscall"
	"time"
)

// ErrForbiddenTarget is a request the proxy refuses to carry because of where it goes: the
// control plane (the rack itself, its regions), loopback, link-local or a port not allowed.
var ErrForbiddenTarget = errors.New("forbidden target")

// Targets decides which upstream addresses the proxy may connect to for its clients.
type Targets struct {
	// ControlPlane lists the addresses no client may reach through the proxy: the rack's
	// own and its regions'. It is called for every check, so it follows a region failover
	// or a new interface address.
	ControlPlane func() []netip.Addr
	// permit are addresses allowed whatever the rules: the package's tests' upstreams on
	// loopback.
	permit []netip.Addr
}

// Allowed says whether a client may reach addr through the proxy. Loopback, link-local,
// unspecified, multicast and broadcast addresses are never allowed: behind them are the
// rack's own services and the cloud metadata endpoints (169.254.169.254).
func (t Targets) Allowed(addr netip.Addr) bool {
	addr = addr.Unmap()
	if slices.Contains(t.permit, addr) {
		return true
	}
	if addr.IsLoopback() || addr.IsLinkLocalUnicast() || addr.IsLinkLocalMulticast() || addr.IsMulticast() ||
		addr.IsInterfaceLocalMulticast() || addr.IsUnspecified() || addr == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return false
	}
	if t.ControlPlane != nil && slices.Contains(t.ControlPlane(), addr) {
		return false
	}
	return true
}

// check refuses host when it is, or resolves to, an address not allowed. A name resolving
// to several addresses is refused when any of them is: the dialer could pick that one.
// Through a parent proxy (viaParent), which resolves names itself, a name the rack cannot
// resolve (a closed network whose only resolver is the site's) is left to the parent.
func (t Targets) check(ctx context.Context, host string, viaParent bool) error {
	if a, err := netip.ParseAddr(host); err == nil {
		if !t.Allowed(a) {
			return fmt.Errorf("%w: %s", ErrForbiddenTarget, a)
		}
		return nil
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		if viaParent {
			return nil
		}
		return fmt.Errorf("resolve %s: %w", host, err)
	}
	for _, a := range addrs {
		if !t.Allowed(a) {
			return fmt.Errorf("%w: %s resolves to %s", ErrForbiddenTarget, host, a)
		}
	}
	return nil
}

// dialer connects to upstreams, checking the address it actually connects to (after the
// resolution the check before saw: a name that changed its answer meanwhile is caught here).
func (t Targets) dialer(timeout time.Duration) *net.Dialer {
	return &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second, Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("%w: %s", ErrForbiddenTarget, address)
		}
		if !t.Allowed(ap.Addr()) {
			return fmt.Errorf("%w: %s", ErrForbiddenTarget, ap.Addr())
		}
		return nil
	}}
}
