package integration

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/dev"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

// ipmiSim is a real OpenIPMI ipmi_sim serving IPMI v2.0 over LAN on loopback; its chassis power
// is the file Power holds ("1" on, "0" off), which its chassis_control script reads and writes.
// Like ipmi_sim with no chassis hardware, the script refuses a next-boot device.
type ipmiSim struct {
	Addr, User, Password string
	Power                string
}

func startIPMISim(t *testing.T) ipmiSim {
	t.Helper()
	bin, err := exec.LookPath("ipmi_sim")
	if err != nil {
		t.Skip("ipmi_sim (Debian package openipmi) is not installed")
	}
	dir := t.TempDir()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := pc.LocalAddr().(*net.UDPAddr).Port
	pc.Close()
	sim := ipmiSim{Addr: fmt.Sprintf("127.0.0.1:%d", port), User: "ironflow", Password: "bmc-secret-1", Power: filepath.Join(dir, "power")}
	script := filepath.Join(dir, "chassis.sh")
	writeFile(t, script, 0o755, `#!/bin/sh
op=$1; shift
case "$op" in
get) for p in "$@"; do [ "$p" = power ] && echo "power:$(cat `+sim.Power+` 2>/dev/null || echo 0)"; done;;
set) while [ $# -gt 1 ]; do
	case $1 in power) echo "$2" > `+sim.Power+`;; *) exit 1;; esac
	shift 2
     done;;
esac
`)
	writeFile(t, filepath.Join(dir, "lan.conf"), 0o644, fmt.Sprintf(`name "ironflow-it"
set_working_mc 0x20
  startlan 1
    addr 127.0.0.1 %d
    priv_limit admin
    allowed_auths_callback none md2 md5 straight
    allowed_auths_user none md2 md5 straight
    allowed_auths_operator none md2 md5 straight
    allowed_auths_admin none md2 md5 straight
    guid a123456789abcdefa123456789abcdef
  endlan
  chassis_control "%s"
  user 2 true "%s" "%s" admin 10 none md2 md5 straight
`, port, script, sim.User, sim.Password))
	writeFile(t, filepath.Join(dir, "cmds.emu"), 0o644, "mc_setbmc 0x20\nmc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr\nmc_enable 0x20\n")
	writeFile(t, sim.Power, 0o644, "0\n")
	cmd := exec.Command(bin, "-c", filepath.Join(dir, "lan.conf"), "-f", filepath.Join(dir, "cmds.emu"), "-n", "-s", filepath.Join(dir, "state"))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return sim
}

func writeFile(t *testing.T, path string, mode os.FileMode, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), mode); err != nil {
		t.Fatal(err)
	}
}

func (s ipmiSim) on(t *testing.T) bool {
	t.Helper()
	b, err := os.ReadFile(s.Power)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b)) == "1"
}

// TestMachinePowerThroughIPMI powers a machine through a real ipmi_sim from its rack: the CLI
// sets the BMC credential (a secret a readonly token cannot read, nor another rack), powers it
// on and off (ipmi_sim follows), reads its status; the rack's poll sees a change made behind
// its back; a wrong password is refused naming the BMC and changes nothing; each action is
// audited with who asked; a second machine cannot take the same BMC.
func TestMachinePowerThroughIPMI(t *testing.T) {
	sim := startIPMISim(t)
	s := startStack(t, dev.StackOptions{RunWorker: true, PowerPollInterval: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	a := regionClient(s, "region-a")
	rack := s.Racks["rack-a"]
	aURL := s.Regions["region-a"].URL
	cli, mustCLI := adminCLI(t, s, aURL)

	m, err := a.Machines().Create(ctx, api.Machine{Name: "metal-ipmi", Rack: rack.Uuid})
	if err != nil {
		t.Fatal(err)
	}
	pwFile := filepath.Join(t.TempDir(), "bmc-password")
	writeFile(t, pwFile, 0o600, sim.Password+"\n")
	var set api.Machine
	mustCLI(&set, "machines", "set-power", m.Name, "--power-type", "ipmi", "--power-address", sim.Addr, "--power-user", sim.User, "--power-password-file", pwFile)
	if set.Power == nil || set.Power.Type != api.PowerTypeIPMI || set.Power.Address != sim.Addr || set.Power.State != api.PowerStateUnknown {
		t.Fatalf("set-power answered %+v", set.Power)
	}
	waitRackWorker(ctx, t, s, rack.Uuid)

	out, err := cli("machines", "power", "on", m.Name)
	if err != nil || !strings.Contains(out, "Machine metal-ipmi is on") || !sim.on(t) {
		t.Fatalf("power on: %v: %s (ipmi_sim on: %v)", err, out, sim.on(t))
	}
	if !strings.Contains(out, "next boot from PXE") {
		t.Errorf("power on did not say the BMC refused the PXE boot: %s", out)
	}
	if out, err := cli("machines", "list", "-o", "table"); err != nil || !strings.Contains(out, "POWER") || !powerCell(out, "metal-ipmi", "on") {
		t.Errorf("machines list: %v: %s", err, out)
	}
	out, err = cli("machines", "power", "off", m.Name)
	if err != nil || !strings.Contains(out, "Machine metal-ipmi is off") || sim.on(t) {
		t.Fatalf("power off: %v: %s (ipmi_sim on: %v)", err, out, sim.on(t))
	}
	if out, err := cli("machines", "power", "status", m.Name); err != nil || !strings.Contains(out, "Machine metal-ipmi is off") {
		t.Errorf("power status: %v: %s", err, out)
	}

	// Powered on behind Ironflow's back: the rack's poll shows it on the machine.
	writeFile(t, sim.Power, 0o644, "1\n")
	pollUntil(t, 30*time.Second, "the rack's poll seeing the machine on", func() (bool, error) {
		got, err := a.Machines().Get(ctx, m.Uuid)
		return err == nil && got.Power != nil && got.Power.State == api.PowerStateOn && got.Power.CheckedAt != nil, err
	})

	// The credential is a secret: a readonly token reads neither it nor the rack's route.
	if _, err := a.Users().Create(ctx, api.User{Name: "viewer", Role: api.RoleReadonly}); err != nil {
		t.Fatal(err)
	}
	ro, err := a.MintToken(ctx, "viewer", api.TokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	roc := client.New(aURL, ro.Token)
	if _, err := roc.PowerCredential(ctx, rack.Uuid, m.Uuid); !isStatus(err, http.StatusForbidden) {
		t.Errorf("readonly power credential: %v, want 403", err)
	}
	if _, err := roc.Do(ctx, client.Request{Method: http.MethodGet, Path: "/api/v1/machines/" + m.Uuid + "/secrets/" + url.PathEscape(api.PowerPasswordSecret)}); !isStatus(err, http.StatusForbidden) {
		t.Errorf("readonly secret read: %v, want 403", err)
	}
	if got, err := roc.Machines().Get(ctx, m.Uuid); err != nil || strings.Contains(string(mustJSON(t, got)), sim.Password) {
		t.Errorf("readonly machine read: %v: %s", err, mustJSON(t, got))
	}
	if out, err := runCLIAs(t, s, ro.Token, "-E", aURL, "machines", "power", "off", m.Name); err == nil || !strings.Contains(out, "403") || !sim.on(t) {
		t.Errorf("readonly power off: %v: %s (ipmi_sim on: %v)", err, out, sim.on(t))
	}

	// A second machine cannot take the BMC.
	other, err := a.Machines().Create(ctx, api.Machine{Name: "metal-other", Rack: rack.Uuid})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.SetPower(ctx, other.Uuid, api.PowerConfig{Type: api.PowerTypeIPMI, Address: sim.Addr, User: "x", Password: "y"}); !isStatus(err, http.StatusConflict) || !strings.Contains(err.Error(), "metal-ipmi") {
		t.Errorf("same BMC on a second machine: %v, want 409 naming metal-ipmi", err)
	}

	// A wrong password: refused naming the BMC, the machine stays on.
	if _, err := a.SetPower(ctx, m.Uuid, api.PowerConfig{Type: api.PowerTypeIPMI, Address: sim.Addr, User: sim.User, Password: "wrong-password"}); err != nil {
		t.Fatal(err)
	}
	out, err = cli("machines", "power", "off", m.Name)
	if err == nil || !strings.Contains(out, "BMC "+sim.Addr) || !strings.Contains(out, "wrong user or password") || strings.Contains(out, "wrong-password") || !sim.on(t) {
		t.Errorf("power off with a wrong password: %v: %s (ipmi_sim on: %v)", err, out, sim.on(t))
	}

	events, err := a.Events(ctx, url.Values{"Key": {m.Uuid}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, e := range events {
		if strings.HasPrefix(e.Action, "power-") || e.Action == "set-power" {
			seen[e.Action+" "+fmt.Sprint(e.Details["Result"])] = fmt.Sprint(e.Details["RequestedBy"])
		}
		if strings.Contains(string(mustJSON(t, e)), sim.Password) || strings.Contains(string(mustJSON(t, e)), "wrong-password") {
			t.Errorf("audit event holds the BMC password: %s", mustJSON(t, e))
		}
	}
	for _, want := range []string{"power-on ok", "power-off ok", "power-status ok", "power-off failed"} {
		if by, ok := seen[want]; !ok || by != "admin" {
			t.Errorf("audit: %q by %q missing (have %v)", want, by, seen)
		}
	}
}

// powerCell reports whether the line of machine name in a `machines list` table ends with state.
func powerCell(table, name, state string) bool {
	for _, line := range strings.Split(table, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[1] == name && f[len(f)-1] == state {
			return true
		}
	}
	return false
}

func isStatus(err error, code int) bool {
	apiErr, ok := err.(*client.APIError)
	return ok && apiErr.StatusCode == code
}
