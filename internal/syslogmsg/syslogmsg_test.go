package syslogmsg

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

var now = time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC)

func TestParse(t *testing.T) {
	tests := []struct {
		name, line string
		want       Message
	}{
		{"RFC 5424 with structured data", `<165>1 2026-12-01T14:59:58.003Z host-1 agent 42 ID7 [ex@32473 k="v\]"] hello there`,
			Message{Facility: 20, Severity: 5, Time: time.Date(2026, 12, 1, 14, 59, 58, 3e6, time.UTC), Hostname: "host-1", App: "agent", ProcID: "42", MsgID: "ID7", Text: `[ex@32473 k="v\]"] hello there`}},
		{"RFC 5424 nil fields, BOM", "<13>1 - - - - - - \xef\xbb\xbfcafé",
			Message{Facility: 1, Severity: 5, Text: "café"}},
		{"RFC 5424 without message", `<14>1 - h a - - -`, Message{Facility: 1, Severity: 6, Hostname: "h", App: "a"}},
		{"RFC 3164", `<34>Oct 11 22:14:15 mymachine su[123]: 'su root' failed`,
			Message{Facility: 4, Severity: 2, Time: time.Date(2026, 10, 11, 22, 14, 15, 0, time.UTC), Hostname: "mymachine", App: "su", ProcID: "123", Text: "'su root' failed"}},
		{"RFC 3164 of last year", `<13>Dec 31 23:59:59 h kernel: boot`,
			Message{Facility: 1, Severity: 5, Time: time.Date(2025, 12, 31, 23, 59, 59, 0, time.UTC), Hostname: "h", App: "kernel", Text: "boot"}},
		{"RFC 3164 padded day", `<13>Jan  2 03:04:05 h cron: x`,
			Message{Facility: 1, Severity: 5, Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Hostname: "h", App: "cron", Text: "x"}},
		{"high-precision BSD", `<30>2026-12-01T14:00:00+01:00 node systemd[1]: Started.`,
			Message{Facility: 3, Severity: 6, Time: time.Date(2026, 12, 1, 14, 0, 0, 0, time.FixedZone("", 3600)), Hostname: "node", App: "systemd", ProcID: "1", Text: "Started."}},
		{"tag only (busybox, iPXE)", `<6>ipxe: DHCP ok`, Message{Facility: 0, Severity: 6, App: "ipxe", Text: "DHCP ok"}},
		{"no header at all", `<0>just words here`, Message{Text: "just words here"}},
		{"broken 5424 falls back to text", `<13>1 notatime h a - - - m`, Message{Facility: 1, Severity: 5, Text: "1 notatime h a - - - m"}},
		{"control characters escaped", "<13>app: a\x1b[31mred\x00\x7f\xc2\x85\u2028\xff", Message{Facility: 1, Severity: 5, App: "app", Text: `a\x1b[31mred\x00\x7f\u0085\u2028\xff`}},
		{"newline in 5424 host escaped", "<13>1 - h\x01 a - - - m", Message{Facility: 1, Severity: 5, Hostname: `h\x01`, App: "a", Text: "m"}},
		{"format characters escaped in every 5424 field", "<13>1 - h\u202e a\u200b p\u2066 m\ufeff [x k=\"\u200d\"] gnp.exe\u202c\u2029\U000e0041",
			Message{Facility: 1, Severity: 5, Hostname: `h\u202e`, App: `a\u200b`, ProcID: `p\u2066`, MsgID: `m\ufeff`, Text: `[x k="\u200d"] gnp.exe\u202c\u2029\U000e0041`}},
		{"format characters escaped in 3164 fields", "<13>Oct 11 22:14:15 h\u200f su[1\u061c]: \u202eabc\u2028",
			Message{Facility: 1, Severity: 5, Time: time.Date(2026, 10, 11, 22, 14, 15, 0, time.UTC), Hostname: `h\u200f`, App: "su", ProcID: `1\u061c`, Text: `\u202eabc\u2028`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.line), now)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Time.Equal(tt.want.Time) {
				t.Errorf("time %v, want %v", got.Time, tt.want.Time)
			}
			got.Time, tt.want.Time = time.Time{}, time.Time{}
			if got != tt.want {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseRefusesGarbage(t *testing.T) {
	for _, line := range []string{"", "hello", "<>x", "<192>x", "<1234>x", "<a>x", "<12", strings.Repeat("<1>", MaxLine)} {
		if m, err := Parse([]byte(line), now); err == nil {
			t.Errorf("Parse(%.40q) = %+v, want an error", line, m)
		}
	}
}

func TestClean(t *testing.T) {
	for s, ok := range map[string]bool{"plain text é": true, `a\x00b`: true, "tab\there": false, "nl\n": false, "\xff": false, "\u0085": false, "\u2029": false,
		"\u202e": false, "\u202c": false, "\u200b": false, "\u2028": false, "\ufeff": false, "\U000e0001": false, `\u202e`: true} {
		if err := Clean(s); (err == nil) != ok {
			t.Errorf("Clean(%q) = %v, want ok=%v", s, err, ok)
		}
	}
}

// TestEscapeLeavesEscapedTextAsItIs: escaping what is already escaped changes nothing, so a
// reader may escape again what it cannot trust to be escaped (rows stored before a character
// was escaped, another region) without garbling what was.
func TestEscapeLeavesEscapedTextAsItIs(t *testing.T) {
	for _, raw := range []string{"plain é", "a\x1b[31m\x00\xff\u0085", "\u202egnp.exe\u202c \u200b\u2028\U000e0041"} {
		once := Escape([]byte(raw))
		if twice := Escape([]byte(once)); twice != once || Clean(once) != nil {
			t.Errorf("Escape(%q) = %q, again %q", raw, once, twice)
		}
	}
}

// FuzzParse: whatever the line, Parse does not panic, and what it returns is safe to store:
// valid UTF-8 without control characters, priorities in range, fields within their bounds.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`<165>1 2026-12-01T14:59:58.003Z host-1 agent 42 ID7 [ex@32473 k="v\]"][b] hello`,
		`<34>Oct 11 22:14:15 mymachine su[123]: 'su root' failed`,
		"<13>1 - - - - - - \xef\xbb\xbfcafé", "<6>ipxe: DHCP ok", "<0>\x00\x1b\xff\xc2\x85",
		`<30>2026-12-01T14:00:00+01:00 node systemd[1]: Started.`, `<13>1 - h a - - [x k="\"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		m, err := Parse(line, now)
		if err != nil {
			return
		}
		if m.Facility < 0 || m.Facility > 23 || m.Severity < 0 || m.Severity > 7 {
			t.Fatalf("priority out of range: %+v", m)
		}
		for _, f := range []struct {
			name, v string
			max     int
		}{{"hostname", m.Hostname, MaxHostname}, {"app", m.App, MaxApp}, {"procid", m.ProcID, MaxProcID}, {"msgid", m.MsgID, MaxMsgID}, {"text", m.Text, MaxText}} {
			if err := Clean(f.v); err != nil {
				t.Fatalf("%s %q: %v", f.name, f.v, err)
			}
			if len(f.v) > f.max || !utf8.ValidString(f.v) {
				t.Fatalf("%s of %d bytes (max %d)", f.name, len(f.v), f.max)
			}
		}
	})
}
