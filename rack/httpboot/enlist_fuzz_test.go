package httpboot

import (
	"bytes"
	"net/url"
	"strings"
	"testing"
	"unicode"

	"github.com/ironflow/ironflow/region/api"
)

// FuzzEnlistScript feeds arbitrary enlistment queries and region messages to the rack: a
// report it accepts holds only printable, bounded values and a MAC, and the script it
// answers is the discovery boot with one echo line, whatever the region said.
func FuzzEnlistScript(f *testing.F) {
	f.Add("mac=52-54-00-aa-bb-cc&uuid=4c4c4544-0042-3510-8051-b7c04f4e3732&serial=435a2031323334&buildarch=x86_64", "refused: ${x}\nkernel evil")
	f.Add("mac=52:54:00:aa:bb:cc&product=e280ae1b&platform=%E2%80%AE", "")
	f.Add("mac=zz&mac=yy", "\x00")
	f.Fuzz(func(t *testing.T, query, regionMsg string) {
		q, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		facts, mac, err := parseBootFacts(q)
		if err != nil {
			return
		}
		for _, v := range []string{facts.MAC, facts.UUID, facts.Serial, facts.Manufacturer, facts.Product, facts.BuildArch, facts.Platform} {
			if len(v) > api.MaxEnlistValue || strings.ContainsFunc(v, func(r rune) bool { return !unicode.IsPrint(r) }) {
				t.Fatalf("accepted value %q", v)
			}
		}
		s := &Server{cfg: Config{Discovery: discovery}}
		var b bytes.Buffer
		if err := machineScript.Execute(&b, s.discoveryScript("http://rack", mac, "enlisting machine", scriptNote(regionMsg))); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
		if len(lines) != 6 || !strings.HasPrefix(lines[2], "echo Ironflow: ") || strings.Contains(lines[2], "$") ||
			!strings.HasPrefix(lines[3], "kernel http://rack/boot/discovery/vmlinuz ") || lines[5] != "boot" {
			t.Fatalf("script:\n%s", b.String())
		}
	})
}
