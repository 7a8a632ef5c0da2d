package esxi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

const sshdPath = "/usr/sbin/sshd"

// sshd is a real OpenSSH server on 127.0.0.1 with its own host key, config and authorized
// keys file, all in a temp dir.
type sshd struct {
	addr     string
	hostKey  string // authorized_keys format, without comment
	keysFile string // AuthorizedKeysFile of the server
}

// lockedBuffer collects sshd's log for a failing test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startSSHD(t *testing.T, dir string) *sshd {
	t.Helper()
	if _, err := os.Stat(sshdPath); err != nil {
		t.Skipf("OpenSSH server not installed (%s missing): apt-get install openssh-server", sshdPath)
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

	s := &sshd{addr: addr, hostKey: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))), keysFile: filepath.Join(dir, "keys", "authorized_keys")}
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
`, addr, hostKeyFile, s.keysFile, filepath.Join(dir, "sshd.pid"))), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	var log lockedBuffer
	cmd := exec.Command(sshdPath, "-f", config, "-D", "-e")
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
