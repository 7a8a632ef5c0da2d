package pods

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/digitalocean/go-libvirt"
	"github.com/digitalocean/go-libvirt/socket/dialers"
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
		Timeout:           timeout,
		HostKeyCallback: func(_ string, _ net.Addr, key ssh.PublicKey) error {
			if !bytes.Equal(key.Marshal(), want.Marshal()) {
				return fmt.Errorf("%w: offered %s %s, recorded %s", ErrHostKeyMismatch, key.Type(), ssh.FingerprintSHA256(key), ssh.FingerprintSHA256(want))
			}
			return nil
		},
	}
	client, err := ssh.Dial("tcp", s.Addr, cfg)
	if errors.Is(err, ErrHostKeyMismatch) {
		return nil, refuse(fmt.Errorf("pod ssh %s: %w", s.Addr, err))
	}
	if err != nil {
		return nil, fmt.Errorf("pod ssh %s: %w", s.Addr, err)
	}
	socket := s.Socket
	if socket == "" {
		socket = DefaultSocket
	}
	stream, err := client.Dial("unix", socket)
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("pod ssh %s: forward libvirt socket %s: %w", s.Addr, socket, err)
	}
	lv := libvirt.NewWithDialer(dialers.NewAlreadyConnected(stream))
	if err := lv.ConnectToURI(libvirt.QEMUSystem); err != nil {
		client.Close()
		return nil, fmt.Errorf("pod ssh %s: connect to libvirt at %s: %w", s.Addr, socket, err)
	}
	return &Conn{lv: lv, closeTransport: client.Close}, nil
}
