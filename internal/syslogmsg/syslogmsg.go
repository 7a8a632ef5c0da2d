// Package syslogmsg parses one syslog message, in the format of RFC 5424 or the BSD format of
// RFC 3164, and makes every text field safe to store and print: control characters, format
// characters (bidi controls, zero-width characters) and invalid UTF-8 are escaped, never
// kept raw, so that a line cannot show differently from what it holds. The rack parses with
// it; the region checks what racks send with Clean; the region's logs route and the CLI
// escape what they show with EscapeRecord.
package syslogmsg

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ironflow/ironflow/region/api"
)

// MaxLine is the longest message the rack accepts (bytes on the wire, framing excluded).
const MaxLine = 8192

// MaxText bounds an escaped message text: escaping turns one byte into at most 4 (\xNN; a
// longer escape stands for a rune of 2 to 4 bytes).
const MaxText = 4 * MaxLine

// Lengths of the header fields (RFC 5424 section 6).
const (
	MaxHostname = 255
	MaxApp      = 48
	MaxProcID   = 128
	MaxMsgID    = 32
)

// Message is one parsed syslog message. Every string is valid UTF-8 without control or
// format characters (see Escape).
type Message struct {
	Facility int       // 0..23
	Severity int       // 0..7
	Time     time.Time // the sender's timestamp; zero when it gave none or an unreadable one
	Hostname string
	App      string // APP-NAME (RFC 5424) or TAG (RFC 3164)
	ProcID   string
	MsgID    string
	Text     string // the message, RFC 5424 structured data first when present
}

// ErrNoPriority is the error for a line that does not start with a <PRI> of 0..191: it is not
// syslog.
var ErrNoPriority = errors.New("not syslog: no <PRI> (0..191) at the start")

// Parse reads one message (without its framing). now dates RFC 3164 timestamps, which carry
// no year. Anything after a valid <PRI> is accepted: what does not fit a header field is text.
func Parse(line []byte, now time.Time) (Message, error) {
	if len(line) > MaxLine {
		return Message{}, fmt.Errorf("message of %d bytes is longer than %d", len(line), MaxLine)
	}
	pri, rest, ok := priority(line)
	if !ok {
		return Message{}, ErrNoPriority
	}
	m := Message{Facility: pri / 8, Severity: pri % 8}
	if v, after, ok := bytes.Cut(rest, []byte(" ")); ok && string(v) == "1" {
		if m.rfc5424(after) {
			return m, nil
		}
		m = Message{Facility: pri / 8, Severity: pri % 8}
	}
	m.rfc3164(rest, now)
	return m, nil
}

// priority reads "<N>" with 1 to 3 digits and N <= 191.
func priority(b []byte) (int, []byte, bool) {
	if len(b) < 3 || b[0] != '<' {
		return 0, nil, false
	}
	end := bytes.IndexByte(b[:min(len(b), 5)], '>')
	if end < 2 {
		return 0, nil, false
	}
	n := 0
	for _, c := range b[1:end] {
		if c < '0' || c > '9' {
			return 0, nil, false
		}
		n = n*10 + int(c-'0')
	}
	if n > 191 {
		return 0, nil, false
	}
	return n, b[end+1:], true
}

// rfc5424 reads "TIMESTAMP HOSTNAME APP-NAME PROCID MSGID SD [MSG]" and reports whether the
// header was well formed.
func (m *Message) rfc5424(b []byte) bool {
	var f [5][]byte
	for i := range f {
		var ok bool
		if f[i], b, ok = bytes.Cut(b, []byte(" ")); !ok || len(f[i]) == 0 {
			return false // SD follows MSGID: every field ends with a space
		}
	}
	if string(f[0]) != "-" {
		t, err := time.Parse(time.RFC3339Nano, string(f[0]))
		if err != nil {
			return false
		}
		m.Time = t
	}
	m.Hostname = header(f[1], MaxHostname)
	m.App = header(f[2], MaxApp)
	m.ProcID = header(f[3], MaxProcID)
	m.MsgID = header(f[4], MaxMsgID)
	sd, msg, ok := structuredData(b)
	if !ok {
		return false
	}
	msg = bytes.TrimPrefix(msg, []byte("\xef\xbb\xbf")) // the BOM announcing UTF-8
	switch {
	case sd == "":
		m.Text = Escape(msg)
	case len(msg) == 0:
		m.Text = sd
	default:
		m.Text = sd + " " + Escape(msg)
	}
	return true
}

// structuredData splits "-" or "[id k="v" ...]..." from the message after it.
func structuredData(b []byte) (string, []byte, bool) {
	if len(b) > 0 && b[0] == '-' {
		return "", trimSpace1(b[1:]), len(b) == 1 || b[1] == ' '
	}
	i := 0
	for i < len(b) && b[i] == '[' {
		n := sdElement(b[i:])
		if n == 0 {
			return "", nil, false
		}
		i += n
	}
	if i == 0 || i < len(b) && b[i] != ' ' {
		return "", nil, false
	}
	return Escape(b[:i]), trimSpace1(b[i:]), true
}

// sdElement returns the length of the "[...]" element at the start of b, 0 when it is not
// closed; inside quoted values a backslash escapes the next byte.
func sdElement(b []byte) int {
	inQuote := false
	for j := 1; j < len(b); j++ {
		switch {
		case inQuote && b[j] == '\\':
			j++
		case b[j] == '"':
			inQuote = !inQuote
		case !inQuote && b[j] == ']':
			return j + 1
		}
	}
	return 0
}

func trimSpace1(b []byte) []byte {
	if len(b) > 0 && b[0] == ' ' {
		return b[1:]
	}
	return b
}

// header is an RFC 5424 header field: "-" is empty; anything else is escaped and cut to max.
func header(b []byte, max int) string {
	if string(b) == "-" {
		return ""
	}
	return truncate(Escape(b), max)
}

// truncate cuts s to at most max bytes on a rune boundary.
func truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	for max > 0 && !utf8.RuneStart(s[max]) {
		max--
	}
	return s[:max]
}

// bsdStamp is the RFC 3164 timestamp ("Jan  2 15:04:05", day padded with a space).
const bsdStamp = "Jan _2 15:04:05"

// rfc3164 reads "[TIMESTAMP HOSTNAME ]TAG[PID]: MSG" leniently: without a timestamp there is
// no hostname, and a line whose tag is not a plain word is all message.
func (m *Message) rfc3164(b []byte, now time.Time) {
	if len(b) >= len(bsdStamp) {
		if t, err := time.ParseInLocation(bsdStamp, string(b[:len(bsdStamp)]), now.Location()); err == nil {
			m.Time = bsdYear(t, now)
			b = hostname(m, b[len(bsdStamp):])
		}
	}
	if m.Time.IsZero() {
		// rsyslog's and systemd's high-precision variant: an RFC 3339 timestamp.
		if v, after, ok := bytes.Cut(b, []byte(" ")); ok {
			if t, err := time.Parse(time.RFC3339Nano, string(v)); err == nil {
				m.Time = t
				b = hostname(m, append([]byte(" "), after...))
			}
		}
	}
	b = m.tag(b)
	m.Text = Escape(b)
}

// hostname takes " HOST " after a timestamp.
func hostname(m *Message, b []byte) []byte {
	if len(b) == 0 || b[0] != ' ' {
		return b
	}
	host, rest, ok := bytes.Cut(b[1:], []byte(" "))
	if !ok || len(host) == 0 {
		return b[1:]
	}
	m.Hostname = truncate(Escape(host), MaxHostname)
	return rest
}

// tag takes "app[pid]: " or "app: " from the start of b.
func (m *Message) tag(b []byte) []byte {
	end := 0
	for end < len(b) && end <= MaxApp && isTagChar(b[end]) {
		end++
	}
	if end == 0 || end > MaxApp || end == len(b) {
		return b
	}
	app, rest := b[:end], b[end:]
	pid := []byte(nil)
	if rest[0] == '[' {
		close := bytes.IndexByte(rest, ']')
		if close < 0 || close > MaxProcID+1 {
			return b
		}
		pid, rest = rest[1:close], rest[close+1:]
	}
	if len(rest) == 0 || rest[0] != ':' {
		return b
	}
	m.App, m.ProcID = string(app), Escape(pid)
	return trimSpace1(rest[1:])
}

func isTagChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_./", c) >= 0
}

// bsdYear gives a year-less timestamp the year that puts it closest before now (a message
// stamped Dec 31 read on Jan 1 is of last year).
func bsdYear(t, now time.Time) time.Time {
	t = t.AddDate(now.Year(), 0, 0)
	if t.Sub(now) > 24*time.Hour {
		t = t.AddDate(-1, 0, 0)
	}
	return t
}

// Escape returns b as valid UTF-8 without control or format characters: a control character
// (C0, DEL, C1), a format character (category Cf: bidi controls, zero-width characters, the
// BOM) or a line or paragraph separator is written \xNN, \uNNNN or \UNNNNNNNN, an invalid
// byte \xNN. A backslash is kept as it is, so escaping escaped text changes nothing: a reader
// may escape again what it cannot trust to be escaped. The price: a sender's own text "\x1b"
// prints like an escaped ESC; either way the screen shows exactly the characters printed.
func Escape(b []byte) string {
	var sb strings.Builder
	sb.Grow(len(b))
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		switch {
		case r == utf8.RuneError && size <= 1:
			writeHex(&sb, `\x`, uint32(b[0]), 2)
		case !unsafeRune(r):
			sb.Write(b[:size])
		case r < utf8.RuneSelf:
			writeHex(&sb, `\x`, uint32(r), 2)
		case r <= 0xffff:
			writeHex(&sb, `\u`, uint32(r), 4)
		default:
			writeHex(&sb, `\U`, uint32(r), 8)
		}
		b = b[size:]
	}
	return sb.String()
}

// escapeString is Escape for a string, which it returns as it is when there is nothing to
// escape.
func escapeString(s string) string {
	if Clean(s) == nil {
		return s
	}
	return Escape([]byte(s))
}

// EscapeRecord escapes every string field of a message read back from the region, for
// showing: one stored before a character was escaped, or sent by a region that does not
// escape, cannot put it raw on a user's screen. What is escaped already stays as it is.
func EscapeRecord(m *api.SyslogMessage) {
	for _, f := range []*string{&m.Machine, &m.Rack, &m.Addr, &m.MAC, &m.Hostname, &m.App, &m.ProcID, &m.MsgID, &m.Text} {
		*f = escapeString(*f)
	}
}

// writeHex writes prefix and the low digits hex digits of v.
func writeHex(sb *strings.Builder, prefix string, v uint32, digits int) {
	const hex = "0123456789abcdef"
	sb.WriteString(prefix)
	for shift := 4 * (digits - 1); shift >= 0; shift -= 4 {
		sb.WriteByte(hex[v>>shift&0xf])
	}
}

// unsafeRune reports a rune that is not shown as itself: a control character moves the
// cursor or rings, a format character reorders or hides what follows (U+202E shows
// "fdp.exe" as "exe.pdf"), a line or paragraph separator breaks the line.
func unsafeRune(r rune) bool {
	return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}

// Clean reports why s may not be stored as a syslog text field: invalid UTF-8 or a control
// or format character. The region applies it to what racks send.
func Clean(s string) error {
	if !utf8.ValidString(s) {
		return errors.New("not valid UTF-8")
	}
	for i, r := range s {
		if unsafeRune(r) {
			return fmt.Errorf("control or format character %s at byte %d", strconv.QuoteRune(r), i)
		}
	}
	return nil
}
