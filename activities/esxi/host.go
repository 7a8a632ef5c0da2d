// Package esxi repoints the agent config of a host that has no Ironflow agent of its own (ESXi)
// over SSH: it opens root SSH with a temporary key, rewrites the config, then puts sshd and the
// authorized keys back exactly as found (DRP's migrate-machine esxi steps).
package esxi

import (
	"errors"
	"fmt"
	"net"
	"path"
	"strings"
)

// Host is an SSH-reachable host; it travels in activity inputs, so it holds no secret.
type Host struct {
	Addr      string // host:port; port 22 when omitted
	User      string // default "root"
	HostKey   string // the host's public key in authorized_keys format; "" = unknown
	AllowTOFU bool   // accept an unknown host key on first sight (and report it to record)
	Paths     Paths
	Commands  Commands
}

// Paths on the host; empty fields take the ESXi defaults.
type Paths struct {
	AuthorizedKeysFile string // root's authorized keys
	AgentConfig        string // the agent config file to repoint
	BackupDir          string // where the keys and the SSH service state are kept until Cleanup
}

// Commands are shell commands run on the host with /bin/sh -c; empty fields take the ESXi
// defaults. A status command exits 0 for "yes", 1-125 for "no"; 126/127 (cannot run) is an error.
type Commands struct {
	Running string // status: the SSH service runs
	Enabled string // status: the SSH service starts with the host
	Start   string
	Stop    string
	Enable  string
	Disable string
}

// ESXi defaults. ESXi keeps root's keys in /etc/ssh/keys-root and manages sshd as the "SSH"
// service (TSM-SSH) through hostd.
var (
	DefaultPaths = Paths{
		AuthorizedKeysFile: "/etc/ssh/keys-root/authorized_keys",
		AgentConfig:        "/etc/ironflow/agent.yaml",
		BackupDir:          "/etc/ironflow/ssh-backup",
	}
	DefaultCommands = Commands{
		Running: "/etc/init.d/SSH status | grep -q 'is running'",
		Enabled: "chkconfig SSH",
		Start:   "vim-cmd hostsvc/start_ssh",
		Stop:    "vim-cmd hostsvc/stop_ssh",
		Enable:  "vim-cmd hostsvc/enable_ssh",
		Disable: "vim-cmd hostsvc/disable_ssh",
	}
)

// withDefaults fills empty fields and checks the result.
func (h Host) withDefaults() (Host, error) {
	if h.User == "" {
		h.User = "root"
	}
	if _, _, err := net.SplitHostPort(h.Addr); err != nil {
		if h.Addr == "" {
			return h, errors.New("esxi host: address required")
		}
		h.Addr = net.JoinHostPort(strings.Trim(h.Addr, "[]"), "22")
	}
	fill := func(field *string, def string) {
		if *field == "" {
			*field = def
		}
	}
	fill(&h.Paths.AuthorizedKeysFile, DefaultPaths.AuthorizedKeysFile)
	fill(&h.Paths.AgentConfig, DefaultPaths.AgentConfig)
	fill(&h.Paths.BackupDir, DefaultPaths.BackupDir)
	for _, p := range []string{h.Paths.AuthorizedKeysFile, h.Paths.AgentConfig, h.Paths.BackupDir} {
		if !path.IsAbs(p) || path.Clean(p) != p || p == "/" {
			return h, fmt.Errorf("esxi host %s: path %q must be absolute and clean", h.Addr, p)
		}
	}
	fill(&h.Commands.Running, DefaultCommands.Running)
	fill(&h.Commands.Enabled, DefaultCommands.Enabled)
	fill(&h.Commands.Start, DefaultCommands.Start)
	fill(&h.Commands.Stop, DefaultCommands.Stop)
	fill(&h.Commands.Enable, DefaultCommands.Enable)
	fill(&h.Commands.Disable, DefaultCommands.Disable)
	if _, err := h.trust(); err != nil {
		return h, err
	}
	return h, nil
}
