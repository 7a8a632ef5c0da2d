package pods

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"time"

	"golang.org/x/crypto/ssh"
)

// ErrHostKeyMismatch is returned when a pod's SSH server offers another key than the recorded one.
var ErrHostKeyMismatch = errors.New("host key does not match the recorded one")

// SSH reaches a pod's libvirt daemon the way qemu+ssh does: an SSH connection to the pod's host
// that forwards the daemon's unix socket.
type SSH struct {
	Addr    string // host:port
	User    string
	Signer  ssh.Signer
	HostKey string // the host's public key in authorized_keys format: required, there is no trust on first use
	Socket  string // the daemon's socket on the host; "" is DefaultSocket
}

// DialSSH connects to the pod's libvirt daemon through its SSH server.
func DialSSH(s SSH, timeout time.Duration) (*Conn, error) {
	want, _, _, _, err := ssh.ParseAuthorizedKey([]byte(s.HostKey))
	if err != nil {
		return nil, refuse(fmt.Errorf("pod ssh %s: recorded host key: %w", s.Addr, err))
	}
	cfg := &ssh.ClientConfig{
		User:              s.User,
		Auth:              []ssh.AuthMethod{ssh.PublicKeys(s.Signer)},
		HostKeyAlgorithms: []string{want.Type()},
		HostKeyCallback: func(_ string, _ net.Addr, key ssh.PublicKey) error {
			if !bytes.Equal(key.Marshal(), want.Marshal()) {
				return fmt.Errorf("%w: offered %s %s, recorded %s", ErrHostKeyMismatch, key.Type(), ssh.FingerprintSHA256(key), ssh.FingerprintSHA256(want))
			}
			return nil
		},
	}
	// ssh.Dial bounds only the TCP connect: the handshake and the socket forward are bounded by
	// a deadline on the TCP connection, lifted once libvirt's own calls are watched.
	tcp, err := net.DialTimeout("tcp", s.Addr, timeout)
	if err != nil {
		return nil, fmt.Errorf("pod ssh %s: %w", s.Addr, err)
	}
	tcp.SetDeadline(time.Now().Add(timeout))
	sc, chans, reqs, err := ssh.NewClientConn(tcp, s.Addr, cfg)
	if err != nil {
		tcp.Close()
		if errors.Is(err, ErrHostKeyMismatch) {
			err = refuse(err)
		}
		return nil, fmt.Errorf("pod ssh %s: %w", s.Addr, err)
	}
	client := ssh.NewClient(sc, chans, reqs)
	socket := s.Socket
	if socket == "" {
		socket = DefaultSocket
	}
	stream, err := client.Dial("unix", socket)
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("pod ssh %s: forward libvirt socket %s: %w", s.Addr, socket, err)
	}
	tcp.SetDeadline(time.Time{})
	return connect(stream, fmt.Sprintf("%s over ssh %s", socket, s.Addr), timeout, client.Close, func() (*Conn, error) { return DialSSH(s, timeout) })
}
