package esxi

import (
	"testing"

	"github.com/ironflow/ironflow/dev/sshdtest"
)

// sshd is a real OpenSSH server on 127.0.0.1 with its own host key, config and authorized
// keys file, all in a temp dir.
type sshd struct {
	addr     string
	hostKey  string // authorized_keys format, without comment
	keysFile string // AuthorizedKeysFile of the server
}

func startSSHD(t *testing.T, dir string) *sshd {
	t.Helper()
	s := sshdtest.Start(t, dir)
	return &sshd{addr: s.Addr, hostKey: s.HostKey, keysFile: s.KeysFile}
}
