// Package netutil has small network helpers shared by the dev stack and tests.
package netutil

import (
	"fmt"
	"math/rand/v2"
	"net"
)

// FreePort returns a TCP port on 127.0.0.1 that nothing listens on right now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// FreePortIn returns a TCP port in [lo, hi] on 127.0.0.1 that nothing listens on right now,
// trying ports at random so that concurrent callers rarely pick the same one.
func FreePortIn(lo, hi int) (int, error) {
	for range 100 {
		port := lo + rand.IntN(hi-lo+1)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			l.Close()
			return port, nil
		}
	}
	return 0, fmt.Errorf("find a free port in %d-%d: none in 100 tries", lo, hi)
}

// FreeUDPPort returns a UDP port on 127.0.0.1 that nothing listens on right now.
func FreeUDPPort() (int, error) {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free UDP port: %w", err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port, nil
}

// FreeUDPTCPPort returns a port on 127.0.0.1 free for both UDP and TCP right now (a DNS
// server listens on both).
func FreeUDPTCPPort() (int, error) {
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("find a free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		c, err := net.ListenPacket("udp", l.Addr().String())
		l.Close()
		if err == nil {
			c.Close()
			return port, nil
		}
	}
	return 0, fmt.Errorf("find a port free for UDP and TCP: none in 100 tries")
}
