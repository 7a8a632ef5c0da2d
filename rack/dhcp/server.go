package dhcp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/server4"
	"golang.org/x/sys/unix"

	"github.com/ironflow/ironflow/internal/netns"
)

// ServerConfig says where the server listens.
type ServerConfig struct {
	// Interfaces get broadcast service on port 67; each one's first IPv4 address is the
	// server identifier and names the subnet for requests that were not relayed.
	Interfaces []string
	// InterfacesNetns is the network namespace (its ip netns name) that holds Interfaces:
	// their sockets are opened in it, the relay socket in the caller's. "": the caller's.
	InterfacesNetns string
	// RelayAddr ("ip:port") receives relayed requests (giaddr set; the reply goes to
	// giaddr:67) and requests of clients that have an address (renewals, INFORM); others
	// are left to the interfaces. Its server identifier is Config.ServerIP, or the address
	// itself when Config.ServerIP is unset. Bind it to a specific address when interfaces
	// are served too, or broadcasts reach both sockets.
	RelayAddr string
	// Workers answer requests (default DefaultWorkers). A REQUEST holds its worker until its
	// lease is durable, and one group commit covers the grants of all waiting workers.
	Workers int
	// QueueLen bounds the received requests waiting for a worker (default DefaultQueueLen);
	// when it is full the oldest is dropped.
	QueueLen int
	Logger   *slog.Logger // default slog.Default()
}

// Defaults of ServerConfig. At a few thousand requests per second a full queue is a few
// hundred milliseconds of work, well within a client's first retransmission timeout (4 s).
const (
	DefaultWorkers  = 64
	DefaultQueueLen = 1024
)

// Server serves a Handler on sockets.
type Server struct {
	h         *Handler
	log       *slog.Logger
	listeners []*listener
	relay     *listener
	workers   int
	queue     *queue
}

type listener struct {
	conn *net.UDPConn
	name string
	// serverIP is the interface address, or for the relay socket its bound address (used
	// when Config.ServerIP is unset).
	serverIP netip.Addr
}

// NewServer opens the sockets. Call it in the network namespace the sockets belong to.
func NewServer(h *Handler, cfg ServerConfig) (*Server, error) {
	if cfg.Workers < 0 || cfg.QueueLen < 0 {
		return nil, fmt.Errorf("dhcp server: negative worker count %d or queue length %d", cfg.Workers, cfg.QueueLen)
	}
	s := &Server{h: h, log: cmp.Or(cfg.Logger, slog.Default()), workers: cmp.Or(cfg.Workers, DefaultWorkers)}
	s.queue = newQueue(cmp.Or(cfg.QueueLen, DefaultQueueLen), h.metrics.queueDepth, h.metrics.queueFull)
	openInterfaces := func() error {
		for _, name := range cfg.Interfaces {
			l, err := openInterface(name)
			if err != nil {
				return err
			}
			s.listeners = append(s.listeners, l)
		}
		return nil
	}
	if err := netns.Run(cfg.InterfacesNetns, openInterfaces); err != nil {
		s.close()
		return nil, err
	}
	if cfg.RelayAddr != "" {
		ua, err := net.ResolveUDPAddr("udp4", cfg.RelayAddr)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("dhcp relay address %q: %w", cfg.RelayAddr, err)
		}
		conn, err := server4.NewIPv4UDPConn("", ua)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("dhcp relay socket %s: %w", cfg.RelayAddr, err)
		}
		bound, _ := netip.AddrFromSlice(ua.IP.To4())
		if !h.cfg.Load().ServerIP.IsValid() && (!bound.IsValid() || bound.IsUnspecified()) {
			conn.Close()
			s.close()
			return nil, fmt.Errorf("dhcp relay address %q: a wildcard address needs Config.ServerIP", cfg.RelayAddr)
		}
		growReceiveBuffer(conn)
		s.relay = &listener{conn: conn, name: "relay", serverIP: bound}
		s.listeners = append(s.listeners, s.relay)
	}
	if len(s.listeners) == 0 {
		return nil, errors.New("dhcp server: no interface and no relay address configured")
	}
	return s, nil
}

func openInterface(name string) (*listener, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("dhcp interface %s: %w", name, err)
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return nil, fmt.Errorf("dhcp interface %s addresses: %w", name, err)
	}
	var ip netip.Addr
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if v, ok := netip.AddrFromSlice(n.IP.To4()); ok {
				ip = v
				break
			}
		}
	}
	if !ip.IsValid() {
		return nil, fmt.Errorf("dhcp interface %s has no IPv4 address", name)
	}
	conn, err := server4.NewIPv4UDPConn(name, &net.UDPAddr{Port: dhcpv4.ServerPort})
	if err != nil {
		return nil, fmt.Errorf("dhcp interface %s: %w", name, err)
	}
	growReceiveBuffer(conn)
	return &listener{conn: conn, name: name, serverIP: ip}, nil
}

// receiveBuffer covers the moments the reader is not scheduled (a datagram costs ~2 KiB of
// buffer, so ~500 of them): the default (~200 KiB) drops a PXE storm's burst. It is kept
// small because the kernel queue is first in, first out: the server's own queue, which drops
// the oldest, is where a backlog should wait.
const receiveBuffer = 1 << 20

// growReceiveBuffer raises the socket's receive buffer, past net.core.rmem_max when the
// process may (CAP_NET_ADMIN); otherwise it keeps what the kernel allows.
func growReceiveBuffer(conn *net.UDPConn) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return
	}
	raw.Control(func(fd uintptr) {
		if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, receiveBuffer) != nil {
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, receiveBuffer)
		}
	})
}

// RelayAddr is the bound address of the relay socket (nil without one).
func (s *Server) RelayAddr() *net.UDPAddr {
	if s.relay == nil {
		return nil
	}
	return s.relay.conn.LocalAddr().(*net.UDPAddr)
}

func (s *Server) close() {
	for _, l := range s.listeners {
		l.conn.Close()
	}
}

// Serve answers requests until ctx ends, then closes the sockets. One reader per socket
// queues what it receives; a fixed pool of workers answers.
func (s *Server) Serve(ctx context.Context) error {
	var workers, readers sync.WaitGroup
	for range s.workers {
		workers.Go(s.work)
	}
	errs := make(chan error, len(s.listeners))
	for _, l := range s.listeners {
		readers.Go(func() { errs <- s.read(l) })
	}
	s.log.Info("DHCP server serving", "sockets", len(s.listeners), "workers", s.workers)
	var err error
	select {
	case <-ctx.Done():
	case err = <-errs: // a socket failed: stop everything
	}
	s.close()
	readers.Wait()
	s.queue.close()
	workers.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("dhcp server: %w", err)
}

// read queues the datagrams of a socket until it is closed. It only copies: parsing is the
// workers' job, so the socket is drained as fast as possible.
func (s *Server) read(l *listener) error {
	buf := make([]byte, 4096)
	for {
		n, _, err := l.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			return fmt.Errorf("%s: %w", l.name, err)
		}
		s.queue.push(datagram{l: l, data: append([]byte(nil), buf[:n]...)})
	}
}

// work answers queued datagrams until the queue is closed.
func (s *Server) work() {
	for {
		d, ok := s.queue.pop()
		if !ok {
			return
		}
		req, err := dhcpv4.FromBytes(d.data)
		if err != nil {
			s.h.metrics.malformed.Inc()
			s.log.Debug("malformed DHCP packet dropped", "on", d.l.name, "error", err)
			continue
		}
		if d.l == s.relay && !addr(req.GatewayIPAddr).IsValid() && !addr(req.ClientIPAddr).IsValid() {
			continue // a broadcast from a local link: the relay socket has no link to answer on
		}
		s.respond(d.l, req)
	}
}

func (s *Server) respond(l *listener, req *dhcpv4.DHCPv4) {
	serverIP := l.serverIP
	if configured := s.h.cfg.Load().ServerIP; l == s.relay && configured.IsValid() {
		serverIP = configured
	}
	resp, err := s.h.Handle(req, serverIP)
	if err != nil {
		s.log.Debug("DHCP request not answered", "on", l.name, "error", err)
		return
	}
	if resp == nil {
		return
	}
	dst, ok := replyAddr(req, resp, l != s.relay)
	if !ok {
		s.log.Debug("DHCP reply has no unicast destination on the relay socket", "mac", req.ClientHWAddr)
		return
	}
	if _, err := l.conn.WriteTo(resp.ToBytes(), dst); err != nil {
		s.log.Warn("DHCP reply not sent", "on", l.name, "to", dst, "error", err)
	}
}

// replyAddr is where a reply goes (RFC 2131 4.1): to the relay, to a client that has an
// address, else broadcast on the link. Without a link (the relay socket) nothing is
// broadcast. Unicast to yiaddr would need an ARP entry that a UDP socket cannot install,
// and clients accept broadcast replies.
func replyAddr(req, resp *dhcpv4.DHCPv4, canBroadcast bool) (*net.UDPAddr, bool) {
	if g := addr(req.GatewayIPAddr); g.IsValid() {
		return &net.UDPAddr{IP: g.AsSlice(), Port: dhcpv4.ServerPort}, true
	}
	ci := addr(req.ClientIPAddr)
	if ci.IsValid() && (resp.MessageType() != dhcpv4.MessageTypeNak || !canBroadcast) {
		return &net.UDPAddr{IP: ci.AsSlice(), Port: dhcpv4.ClientPort}, true
	}
	if !canBroadcast {
		return nil, false
	}
	return &net.UDPAddr{IP: net.IPv4bcast, Port: dhcpv4.ClientPort}, true
}
