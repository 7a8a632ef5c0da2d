package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/dev"
)

func TestDevEnvPrintsExportsABashCanEval(t *testing.T) {
	addrs := dev.StackAddresses{
		Regions:     map[string]string{"region-b": "http://127.0.0.1:5241", "region-a": "http://127.0.0.1:5240"},
		Temporal:    "127.0.0.1:7233",
		CodecURL:    "http://127.0.0.1:8234",
		PayloadKeys: "/root/my clone/.ironflow-dev/payload.keys",
		Racks:       map[string]dev.Rack{"rack-a": {HTTPURL: "http://127.0.0.1:41205", DNS: "127.0.0.1:33247", Syslog: "127.0.0.1:40514"}},
	}
	var out bytes.Buffer
	if err := printDevEnv(&out, addrs, "tok'en"); err != nil {
		t.Fatal(err)
	}
	got, err := exec.Command("bash", "-c", out.String()+`printf '%s|' "$IRONFLOW_TOKEN" "$IRONFLOW_PAYLOAD_KEYS" "$A" "$B" "$TEMPORAL_ADDRESS" "$CODEC_URL" "$RACK_A" "$RACK_A_DNS_PORT" "$RACK_A_SYSLOG"`).CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, got)
	}
	want := "tok'en|/root/my clone/.ironflow-dev/payload.keys|http://127.0.0.1:5240|http://127.0.0.1:5241|127.0.0.1:7233|http://127.0.0.1:8234|http://127.0.0.1:41205|33247|127.0.0.1:40514|"
	if string(got) != want {
		t.Errorf("after eval:\n%s\nwant\n%s\n(from %s)", got, want, out.String())
	}
}

func TestDevEnvRefusesAStateDirNoStackRuns(t *testing.T) {
	for _, dir := range []string{filepath.Join(t.TempDir(), "missing"), t.TempDir()} {
		if err := requireRunningStack(dir); err == nil || !strings.Contains(err.Error(), "no dev stack runs on") {
			t.Errorf("%s: %v", dir, err)
		}
	}
	missing := filepath.Join(t.TempDir(), "missing")
	requireRunningStack(missing)
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("asking created the state dir: %v", err)
	}
}

func TestDevEnvAcceptsAStateDirAStackHolds(t *testing.T) {
	dir := t.TempDir()
	lock, err := dev.LockStateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	if err := requireRunningStack(dir); err != nil {
		t.Errorf("a held state dir: %v", err)
	}
}
