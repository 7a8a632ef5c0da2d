package proxy

import (
	"net"
	"net/netip"
	"sync"
)

// perClientListener closes a new connection of a client address that holds max already,
// so that one machine (slow, or opening connections in a loop) cannot take every one of
// Limits.MaxConns from the others.
type perClientListener struct {
	net.Listener
	max    int
	mu     sync.Mutex
	counts map[netip.Addr]int
	onDrop func() // counts a refused connection
}

func (l *perClientListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := remoteAddr(c)
		l.mu.Lock()
		full := l.counts[addr] >= l.max
		if !full {
			l.counts[addr]++
		}
		l.mu.Unlock()
		if full {
			l.onDrop()
			c.Close()
			continue
		}
		return &clientConn{Conn: c, release: func() { l.release(addr) }}, nil
	}
}

func (l *perClientListener) release(addr netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.counts[addr]--; l.counts[addr] <= 0 {
		delete(l.counts, addr)
	}
}

func remoteAddr(c net.Conn) netip.Addr {
	if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

// clientConn gives its slot back once, when closed.
type clientConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *clientConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}
