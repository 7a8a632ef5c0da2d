package leases

import (
	"bytes"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestCleanHostname(t *testing.T) {
	long := strings.Repeat("a", 70)
	for _, tc := range []struct{ in, want string }{
		{"web-1", "web-1"},
		{"web-1.example.org", "web-1.example.org"},
		{"ev\x00il", "evil"},
		{"tab\there\r\n", "tabhere"},
		{"bad\xff\xfeutf8", "badutf8"},
		{"caf\u00e9\u0085", "caf\u00e9"}, // a C1 control character goes, the accent stays
		{"..a...b.", "a.b"},
		{" \x00 ", ""},
		{long, long[:maxLabel]},
		{strings.Repeat("\u00e9", 40), strings.Repeat("\u00e9", 31)}, // 62 bytes: no half character
	} {
		if got := CleanHostname(tc.in); got != tc.want {
			t.Errorf("CleanHostname(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	many := strings.Repeat(strings.Repeat("b", 63)+".", 10)
	got := CleanHostname(many)
	if len(got) > maxHostname || strings.HasSuffix(got, ".") || !utf8.ValidString(got) {
		t.Errorf("CleanHostname of a %d-byte name gave %d bytes: %q", len(many), len(got), got)
	}
}

func TestGrantCleansTheClientsHostname(t *testing.T) {
	tb := openTable(t, t.TempDir(), newClock(), testPool())
	a, err := tb.Offer(subnetID, mac(1), netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := tb.Grant(subnetID, mac(1), a, "ho\x00st")
	if err != nil {
		t.Fatal(err)
	}
	if l.Hostname != "host" {
		t.Fatalf("granted lease has hostname %q, want %q", l.Hostname, "host")
	}
}

// TestReplayCleansHostnames opens a log written before host names were cleaned: the
// replayed lease has a clean name and the log is rewritten without the raw one.
func TestReplayCleansHostnames(t *testing.T) {
	dir := t.TempDir()
	c := newClock()
	poison := Lease{Addr: addr("10.0.0.15"), MAC: mac(1), Subnet: subnetID, Hostname: "ev\x00il\xff", State: Active,
		Start: c.Now(), Expires: c.Now().Add(time.Hour)}
	if err := os.WriteFile(walPath(dir), appendLeaseFrame(nil, &poison), 0o640); err != nil {
		t.Fatal(err)
	}
	tb := openTable(t, dir, c, testPool())
	l, ok := tb.Lookup(poison.Addr)
	if !ok || l.Hostname != "evil" {
		t.Fatalf("replayed lease %+v (found %v), want hostname %q", l, ok, "evil")
	}
	if ex := tb.Export(); len(ex) != 1 || ex[0].Hostname != "evil" {
		t.Fatalf("export %+v", ex)
	}
	data, err := os.ReadFile(walPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("ev\x00il")) {
		t.Fatal("the log still holds the raw host name after the replay")
	}
}
