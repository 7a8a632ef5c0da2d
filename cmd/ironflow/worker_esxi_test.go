package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"

	"github.com/ironflow/ironflow/activities"
)

// writeKeyFile writes a fresh ed25519 private key in OpenSSH format, encrypted when
// passphrase is not empty, and returns its path and public key.
func writeKeyFile(t *testing.T, passphrase string) (string, ssh.PublicKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var block *pem.Block
	if passphrase == "" {
		block, err = ssh.MarshalPrivateKey(priv, "operator")
	} else {
		block, err = ssh.MarshalPrivateKeyWithPassphrase(priv, "operator", []byte(passphrase))
	}
	if err != nil {
		t.Fatal(err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, "id_ed25519", pem.EncodeToMemory(block)), sshPub
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The variables of the ESXi flags, as operators set them.
const (
	envESXiSSHKey    = "IRONFLOW_ESXI_SSH_KEY"
	envESXiAllowTOFU = "IRONFLOW_ESXI_ALLOW_TOFU"
	envESXiSSHPort   = "IRONFLOW_ESXI_SSH_PORT"
	envESXiUser      = "IRONFLOW_ESXI_USER"
)

// parseESXiFlags runs esxiConfig on the worker command's flags with args and env.
func parseESXiFlags(t *testing.T, args []string, env map[string]string) (activities.ESXiConfig, error) {
	t.Helper()
	for _, name := range []string{envESXiSSHKey, envESXiAllowTOFU, envESXiSSHPort, envESXiUser} {
		t.Setenv(name, "")
		os.Unsetenv(name)
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	var cfg activities.ESXiConfig
	var cfgErr error
	var flags workerFlags
	c := &cobra.Command{Use: "worker"}
	flags.declare(c.Flags())
	if err := parseWithEnv(c, args); err != nil {
		return cfg, err
	}
	cfg, cfgErr = esxiConfig(c, flags.ESXi)
	return cfg, cfgErr
}

func TestWorkerESXiFlags(t *testing.T) {
	keyPath, keyPub := writeKeyFile(t, "")
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantKey bool
		tofu    bool
		port    int
		user    string
	}{
		{"defaults", nil, nil, false, false, 22, "root"},
		{"flags", []string{"--esxi-ssh-key", keyPath, "--esxi-allow-tofu", "--esxi-ssh-port", "2222", "--esxi-user", "admin"}, nil, true, true, 2222, "admin"},
		{"environment", nil, map[string]string{envESXiSSHKey: keyPath, envESXiAllowTOFU: "true", envESXiSSHPort: "2200", envESXiUser: "ops"}, true, true, 2200, "ops"},
		{"flags before environment", []string{"--esxi-allow-tofu=false", "--esxi-ssh-port", "22"}, map[string]string{envESXiAllowTOFU: "true", envESXiSSHPort: "2200"}, false, false, 22, "root"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseESXiFlags(t, tt.args, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.AllowTOFU != tt.tofu || cfg.Port != tt.port || cfg.User != tt.user {
				t.Errorf("config %+v, want TOFU %v port %d user %q", cfg, tt.tofu, tt.port, tt.user)
			}
			switch {
			case !tt.wantKey && cfg.Login != nil:
				t.Error("a login key without --esxi-ssh-key")
			case tt.wantKey && (cfg.Login == nil || !bytes.Equal(cfg.Login.PublicKey().Marshal(), keyPub.Marshal())):
				t.Errorf("login key %v is not the key file's", cfg.Login)
			}
		})
	}
}

func TestWorkerESXiFlagsRefuseBadValues(t *testing.T) {
	protected, _ := writeKeyFile(t, "secret")
	public := writeFile(t, "id.pub", []byte("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGx0 operator\n"))
	missing := filepath.Join(t.TempDir(), "none")
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"missing key file", []string{"--esxi-ssh-key", missing}, nil, "--esxi-ssh-key: ESXi SSH key: open " + missing},
		{"public key", nil, map[string]string{envESXiSSHKey: public}, "IRONFLOW_ESXI_SSH_KEY (--esxi-ssh-key): ESXi SSH key " + public + " is not a private key"},
		{"passphrase", []string{"--esxi-ssh-key", protected}, nil, "is protected by a passphrase"},
		{"TOFU not a boolean", nil, map[string]string{envESXiAllowTOFU: "sure"}, `IRONFLOW_ESXI_ALLOW_TOFU="sure": invalid value for --esxi-allow-tofu`},
		{"port out of range", []string{"--esxi-ssh-port", "70000"}, nil, `--esxi-ssh-port: 70000 is not a TCP port`},
		{"port from the environment", nil, map[string]string{envESXiSSHPort: "ssh"}, `IRONFLOW_ESXI_SSH_PORT="ssh": invalid value for --esxi-ssh-port`},
		{"empty user", []string{"--esxi-user", " "}, nil, "--esxi-user is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := parseESXiFlags(t, tt.args, tt.env); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// A bad key file stops `ironflow worker` at start, before it connects to Temporal.
func TestWorkerRefusesABadESXiKey(t *testing.T) {
	regions := writeRegionsFile(t, "regions:\n  region-a: {url: \"http://127.0.0.1:1\", token: a}\n")
	bad := writeFile(t, "id_rsa", []byte("-----BEGIN OPENSSH PRIVATE KEY-----\ngarbage\n-----END OPENSSH PRIVATE KEY-----\n"))
	code, out, stderr := ironflow(t, "", "worker", "--temporal-address", "127.0.0.1:1", "--regions-file", regions, "--esxi-ssh-key", bad)
	if code == 0 || !strings.Contains(stderr, "ESXi SSH key "+bad+" is not a private key") || strings.Contains(stderr, "connect to Temporal") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}
