// Package ra answers IPv6 router solicitations on the rack's DHCP interfaces with a router
// advertisement that advertises nothing: no prefix, no DHCPv6 (M and O flags clear), router
// lifetime 0 (not a default router). iPXE configures IPv6 next to DHCPv4 and boots only when
// both are done; on a link without an IPv6 router it solicits for about 17 s before it gives
// up. This answer ends that wait at once and tells other hosts on the link nothing.
package ra

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv6"
)

// minInterval spaces the advertisements sent on one interface: solicitations that arrive
// closer together get one multicast answer, which reaches every solicitor.
const minInterval = 100 * time.Millisecond

var (
	allNodes   = net.ParseIP("ff02::1")
	allRouters = net.ParseIP("ff02::2")
)

// Responder answers router solicitations on a set of interfaces.
type Responder struct {
	conn   *icmp.PacketConn
	pc     *ipv6.PacketConn
	ifaces map[int]*link // by interface index
	log    *slog.Logger
}

// link is one interface's advertisement and when it may next be sent.
type link struct {
	name string
	ad   []byte

	mu      sync.Mutex
	next    time.Time
	pending bool
}

// Listen opens the ICMPv6 socket (in the calling thread's network namespace) and joins the
// all-routers group on the named interfaces.
func Listen(names []string, log *slog.Logger) (*Responder, error) {
	if log == nil {
		log = slog.Default()
	}
	conn, err := icmp.ListenPacket("ip6:ipv6-icmp", "::")
	if err != nil {
		return nil, fmt.Errorf("router advertisements: ICMPv6 socket: %w", err)
	}
	r := &Responder{conn: conn, pc: conn.IPv6PacketConn(), ifaces: map[int]*link{}, log: log}
	if err := r.setup(names); err != nil {
		conn.Close()
		return nil, fmt.Errorf("router advertisements: %w", err)
	}
	return r, nil
}

func (r *Responder) setup(names []string) error {
	var f ipv6.ICMPFilter
	f.SetAll(true)
	f.Accept(ipv6.ICMPTypeRouterSolicitation)
	if err := r.pc.SetICMPFilter(&f); err != nil {
		return err
	}
	if err := r.pc.SetControlMessage(ipv6.FlagInterface|ipv6.FlagHopLimit, true); err != nil {
		return err
	}
	// Neighbour discovery messages carry hop limit 255, which proves they were not routed.
	if err := r.pc.SetMulticastHopLimit(255); err != nil {
		return err
	}
	if err := r.pc.SetMulticastLoopback(false); err != nil {
		return err
	}
	for _, name := range names {
		ifi, err := net.InterfaceByName(name)
		if err != nil {
			return err
		}
		if err := r.pc.JoinGroup(ifi, &net.IPAddr{IP: allRouters}); err != nil {
			return fmt.Errorf("join ff02::2 on %s: %w", name, err)
		}
		r.ifaces[ifi.Index] = &link{name: name, ad: advertisement(ifi.HardwareAddr)}
	}
	return nil
}

// advertisement is the router advertisement of an interface with MAC mac (RFC 4861 4.2):
// current hop limit unspecified, M and O clear, router lifetime, reachable time and retrans
// timer 0, and the source link-layer address option. The kernel fills in the checksum.
func advertisement(mac net.HardwareAddr) []byte {
	body := make([]byte, 12)
	if len(mac) == 6 {
		body = append(body, 1, 1) // source link-layer address, one 8-byte block
		body = append(body, mac...)
	}
	msg, _ := (&icmp.Message{Type: ipv6.ICMPTypeRouterAdvertisement, Body: &icmp.RawBody{Data: body}}).Marshal(nil)
	return msg
}

// Serve answers solicitations until ctx ends, then closes the socket.
func (r *Responder) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { r.conn.Close() })
	defer stop()
	buf := make([]byte, 1500)
	for {
		n, cm, src, err := r.pc.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			r.log.Debug("router solicitation not read", "error", err)
			continue
		}
		if cm == nil || n < 8 || buf[0] != byte(ipv6.ICMPTypeRouterSolicitation) || buf[1] != 0 || cm.HopLimit != 255 {
			continue // not a valid solicitation (RFC 4861 6.1.1)
		}
		if l := r.ifaces[cm.IfIndex]; l != nil {
			r.log.Debug("router solicitation", "interface", l.name, "from", src)
			r.answer(cm.IfIndex, l)
		}
	}
}

// answer multicasts the interface's advertisement now, or once minInterval has passed since
// the last one.
func (r *Responder) answer(index int, l *link) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending {
		return
	}
	wait := time.Until(l.next)
	if wait <= 0 {
		r.send(index, l)
		return
	}
	l.pending = true
	time.AfterFunc(wait, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.pending = false
		r.send(index, l)
	})
}

// send needs l.mu held.
func (r *Responder) send(index int, l *link) {
	l.next = time.Now().Add(minInterval)
	dst := &net.IPAddr{IP: allNodes, Zone: l.name}
	if _, err := r.pc.WriteTo(l.ad, &ipv6.ControlMessage{IfIndex: index, HopLimit: 255}, dst); err != nil {
		r.log.Debug("router advertisement not sent", "interface", l.name, "error", err)
	}
}
