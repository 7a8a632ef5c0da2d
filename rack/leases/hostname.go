package leases

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// DNS bounds on a host name, which is also what a stored client host name is cut to.
const (
	maxLabel    = 63
	maxHostname = 255
)

// CleanHostname makes a host name a client sent (DHCP option 12) safe to keep and to pass
// on: invalid UTF-8 and control characters (NUL among them) are dropped, empty labels go,
// each label is cut to 63 bytes and the name to 255, at character and label boundaries.
// The client still gets its address: only the name it claimed is trimmed.
func CleanHostname(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unicode.IsControl(r) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, ""))
	var b strings.Builder
	for label := range strings.SplitSeq(strings.TrimSpace(s), ".") {
		label = truncateUTF8(strings.TrimSpace(label), maxLabel)
		if label == "" {
			continue
		}
		if b.Len() > 0 {
			if b.Len()+1+len(label) > maxHostname {
				break
			}
			b.WriteByte('.')
		}
		b.WriteString(label)
	}
	return b.String()
}

// truncateUTF8 cuts s to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
