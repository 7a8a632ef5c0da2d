// Package sshdtest runs a real OpenSSH server for a test: on 127.0.0.1, with its own host key,
// config and authorized keys file in a directory of the test, stopped when the test ends. It
// also simulates a host's SSH service (state files driven by a shell script), as the ESXi
// repoint sees it.
package sshdtest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ironflow/ironflow/internal/testutil"
)

// Path is where Debian's openssh-server installs sshd.
const Path = "/usr/sbin/sshd"

// Server is a running sshd.
type Server struct {
	Addr     string // 127.0.0.1:port
	HostKey  string // authorized_keys format, without comment
	KeysFile string // its AuthorizedKeysFile (dir/keys/authorized_keys; the keys dir is not created)
}

// Start runs sshd with its files in dir and returns once it listens; the test is skipped when
// OpenSSH is not installed.
func Start(t testing.TB, dir string) *Server {
	t.Helper()
	if _, err := os.Stat(Path); err != nil {
		t.Skipf("OpenSSH server not installed (%s missing): apt-get install openssh-server", Path)
	}
	// Debian's sshd refuses to start without its privilege separation directory.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatal(err)
	}
	hostKeyFile := filepath.Join(dir, "ssh_host_ed25519_key")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", hostKeyFile).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	pubFile, err := os.ReadFile(hostKeyFile + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey(pubFile)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	s := &Server{Addr: addr, HostKey: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))), KeysFile: filepath.Join(dir, "keys", "authorized_keys")}
	config := filepath.Join(dir, "sshd_config")
	err = os.WriteFile(config, []byte(fmt.Sprintf(`ListenAddress %s
HostKey %s
AuthorizedKeysFile %s
PidFile %s
StrictModes no
UsePAM no
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
# bash sources ~/.bashrc for commands run by sshd unless it is a nested shell; this host's root
# .bashrc is slow (pyenv), ESXi's busybox sh has none.
SetEnv SHLVL=1
`, addr, hostKeyFile, s.KeysFile, filepath.Join(dir, "sshd.pid"))), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	var log testutil.SafeBuffer
	cmd := exec.Command(Path, "-f", config, "-D", "-e")
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		syscall.Kill(pid, syscall.SIGTERM)
		cmd.Wait()
		if t.Failed() {
			t.Logf("sshd log:\n%s", log.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
			return s
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("sshd did not listen on %s: %v\n%s", addr, err, log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Authorize makes signer's key the one key the server accepts (its authorized keys file holds
// only it, with comment).
func (s *Server) Authorize(t testing.TB, signer ssh.Signer, comment string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(s.KeysFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.KeysFile, []byte(AuthorizedLine(signer, comment)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Service is a simulated SSH service of a host: two state files under Dir (running, enabled)
// driven by a shell script, so its commands behave like ESXi's without touching the real sshd.
type Service struct {
	Dir    string
	Script string
}

// NewService creates the service in dir/svc with the given state.
func NewService(t testing.TB, dir string, running, enabled bool) *Service {
	t.Helper()
	s := &Service{Dir: filepath.Join(dir, "svc"), Script: filepath.Join(dir, "svc.sh")}
	if err := os.Mkdir(s.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, on := range map[string]bool{"running": running, "enabled": enabled} {
		if on {
			if err := os.WriteFile(filepath.Join(s.Dir, name), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	script := fmt.Sprintf(`S=%s
case $1 in
start) touch $S/running ;;
stop) rm -f $S/running ;;
enable) touch $S/enabled ;;
disable) rm -f $S/enabled ;;
running) test -e $S/running ;;
enabled) test -e $S/enabled ;;
*) exit 2 ;;
esac
`, s.Dir)
	if err := os.WriteFile(s.Script, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return s
}

// Command is the shell command for verb: start, stop, enable, disable, running, enabled.
func (s *Service) Command(verb string) string { return "sh " + s.Script + " " + verb }

// State reports whether the service runs and is enabled.
func (s *Service) State() (running, enabled bool) {
	_, err := os.Stat(filepath.Join(s.Dir, "running"))
	running = err == nil
	_, err = os.Stat(filepath.Join(s.Dir, "enabled"))
	return running, err == nil
}

// NewSigner makes a fresh ed25519 key for a test's SSH client.
func NewSigner(t testing.TB) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// AuthorizedLine is s's public key as an authorized_keys line with comment.
func AuthorizedLine(s ssh.Signer, comment string) string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.PublicKey()))) + " " + comment
}
