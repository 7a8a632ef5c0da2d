package rack

import (
	"bytes"
	"github.com/ironflow/ironflow/internal/testutil"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestRackKeepsTheOperatorsIPXE: an iPXE image the operator put in the boot directory
// survives rack restarts byte for byte and is what the rack serves; images the boot
// directory lacks are installed.
func TestRackKeepsTheOperatorsIPXE(t *testing.T) {
	dir := t.TempDir()
	if err := saveState(dir, State{Uuid: thisRack, Name: "rack-1", Token: "token", Endpoints: []string{"http://127.0.0.1:1"}}); err != nil {
		t.Fatal(err)
	}
	o := rackOptions(t, dir)
	o.IPXEDir = t.TempDir()
	for name, content := range map[string]string{"ipxe.efi": "packaged uefi", "undionly.kpxe": "packaged bios"} {
		if err := os.WriteFile(filepath.Join(o.IPXEDir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	own := []byte("operator's iPXE with an embedded script\x00\x01")
	if err := os.WriteFile(filepath.Join(o.BootDir, "ipxe.efi"), own, 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 { // a start, and a restart
		rk := startRack(t, o)
		for name, want := range map[string][]byte{"ipxe.efi": own, "undionly.kpxe": []byte("packaged bios")} {
			if got, err := os.ReadFile(filepath.Join(o.BootDir, name)); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s in the boot dir: %q (%v), want %q", name, got, err, want)
			}
		}
		var code int
		var body string
		testutil.Eventually(t, 10*time.Second, "HTTP boot", func() bool {
			code, body = httpGet("http://" + o.HTTPListen + "/boot/ipxe.efi")
			return code != 0
		})
		if code != http.StatusOK || body != string(own) {
			t.Fatalf("GET /boot/ipxe.efi: %d %q, want the operator's file", code, body)
		}
		rk.stop()
	}
}
