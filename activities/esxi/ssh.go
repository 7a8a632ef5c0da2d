package esxi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// Host key verdicts; both abort the operation before it changes anything over SSH.
var (
	ErrHostKeyUnknown  = errors.New("host key unknown and trust on first use not allowed")
	ErrHostKeyMismatch = errors.New("host key does not match the recorded one")
)

const dialTimeout = 30 * time.Second

// trust is the host key policy of one operation: the recorded key, or under TOFU the first
// key seen, which every later connection of the operation must present again.
type trust struct {
	tofu bool

	mu       sync.Mutex
	want     ssh.PublicKey
	verified bool  // the host presented the trusted key
	err      error // verdict of the last refused key, kept because ssh wraps it opaquely
}

func (h Host) trust() (*trust, error) {
	t := &trust{tofu: h.AllowTOFU}
	if h.HostKey != "" {
		key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(h.HostKey))
		if err != nil {
			return nil, fmt.Errorf("esxi host %s: recorded host key: %w", h.Addr, err)
		}
		t.want = key
	}
	return t, nil
}

func (t *trust) check(addr string, _ net.Addr, key ssh.PublicKey) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.want == nil && !t.tofu:
		t.err = fmt.Errorf("ssh %s: %w (it offers %s %s)", addr, ErrHostKeyUnknown, key.Type(), ssh.FingerprintSHA256(key))
	case t.want == nil:
		t.want, t.verified = key, true
	case !bytes.Equal(key.Marshal(), t.want.Marshal()):
		t.err = fmt.Errorf("ssh %s: %w: offered %s %s, recorded %s", addr, ErrHostKeyMismatch,
			key.Type(), ssh.FingerprintSHA256(key), ssh.FingerprintSHA256(t.want))
	default:
		t.verified = true
		return nil
	}
	return t.err
}

// key returns the trusted key in authorized_keys format ("" before any was seen under TOFU).
func (t *trust) key() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.want == nil {
		return ""
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(t.want)))
}

// algorithms makes the server present the recorded key's type, so a host with several host
// keys is not refused for showing another one.
func (t *trust) algorithms() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.want == nil:
		return nil
	case t.want.Type() == ssh.KeyAlgoRSA:
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	default:
		return []string{t.want.Type()}
	}
}

func (t *trust) verdict() (verified bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.verified, t.err
}

// dial opens an SSH connection whose host key t accepts. With no signer it only verifies the
// host key (the key exchange comes before authentication) and returns a nil client.
func dial(ctx context.Context, h Host, t *trust, signer ssh.Signer) (*ssh.Client, error) {
	d := net.Dialer{Timeout: dialTimeout}
	conn, err := d.DialContext(ctx, "tcp", h.Addr)
	if err != nil {
		return nil, fmt.Errorf("ssh %s: %w", h.Addr, err)
	}
	deadline := time.Now().Add(dialTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	conn.SetDeadline(deadline)
	cfg := &ssh.ClientConfig{User: h.User, HostKeyCallback: t.check, HostKeyAlgorithms: t.algorithms()}
	if signer != nil {
		cfg.Auth = []ssh.AuthMethod{ssh.PublicKeys(signer)}
	}
	c, chans, reqs, err := ssh.NewClientConn(conn, h.Addr, cfg)
	if err != nil {
		conn.Close()
		verified, verr := t.verdict()
		if verr != nil {
			return nil, verr
		}
		if signer == nil && verified {
			return nil, nil // host key verified; authentication was never the point
		}
		return nil, fmt.Errorf("ssh %s@%s: %w", h.User, h.Addr, err)
	}
	if signer == nil {
		c.Close()
		return nil, nil
	}
	conn.SetDeadline(time.Time{})
	return ssh.NewClient(c, chans, reqs), nil
}

// sshRunner runs scripts over one SSH connection.
type sshRunner struct {
	addr   string
	client *ssh.Client
}

// Run runs script with /bin/sh -c, whatever the login shell, and returns its stdout.
func (r sshRunner) Run(ctx context.Context, script string) ([]byte, error) {
	s, err := r.client.NewSession()
	if err != nil {
		return nil, fmt.Errorf("ssh %s: session: %w", r.addr, err)
	}
	defer s.Close()
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	var stdout, stderr bytes.Buffer
	s.Stdout, s.Stderr = &stdout, &stderr
	if err := s.Run("/bin/sh -c " + shellQuote(script)); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("ssh %s: %w", r.addr, ctx.Err())
		}
		return nil, fmt.Errorf("ssh %s: %w: %s", r.addr, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// shellQuote quotes s as one POSIX shell word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
