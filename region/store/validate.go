package store

import (
	"maps"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"unicode"

	"github.com/google/uuid"
)

// validName checks the Name of an object: present, no surrounding spaces, no control
// characters, no "/" (keys travel in URL paths). keyed names (profiles, pools, users are
// addressed by Name alone) may not contain ":" either, which marks Field:value keys.
func validName(noun, name string, keyed bool) error {
	switch {
	case name == "":
		return invalidf("%s Name is empty", noun)
	case strings.TrimSpace(name) != name:
		return invalidf("%s Name %q has leading or trailing spaces", noun, name)
	case strings.ContainsFunc(name, unicode.IsControl):
		return invalidf("%s Name %q contains control characters", noun, name)
	case strings.Contains(name, "/"):
		return invalidf("%s Name %q contains \"/\"", noun, name)
	case keyed && strings.Contains(name, ":"):
		return invalidf("%s Name %q contains \":\" (reserved for Field:value keys)", noun, name)
	}
	return nil
}

// canonUUID replaces *v with its canonical lower-case form; empty is allowed when optional.
func canonUUID(noun, field string, v *string, optional bool) error {
	if *v == "" && optional {
		return nil
	}
	id, err := uuid.Parse(*v)
	if err != nil {
		return invalidf("%s %s %q is not a UUID", noun, field, *v)
	}
	*v = id.String()
	return nil
}

// optionalUUIDs canonicalises optional UUID fields, checking them in field-name order.
func optionalUUIDs(noun string, fields map[string]*string) error {
	for _, f := range slices.Sorted(maps.Keys(fields)) {
		if err := canonUUID(noun, f, fields[f], true); err != nil {
			return err
		}
	}
	return nil
}

// normMAC returns a MAC lower-case and colon-separated.
func normMAC(s string) (string, error) {
	hw, err := net.ParseMAC(s)
	if err != nil {
		return "", invalidf("%q is not a MAC address", s)
	}
	return hw.String(), nil
}

// canonMACs normalises a list of MACs in place and rejects duplicates.
func canonMACs(noun, field string, macs []string) error {
	seen := map[string]bool{}
	for i, m := range macs {
		n, err := normMAC(m)
		if err != nil {
			return invalidf("%s %s: %q is not a MAC address", noun, field, m)
		}
		if seen[n] {
			return invalidf("%s %s lists MAC %s twice", noun, field, n)
		}
		seen[n] = true
		macs[i] = n
	}
	return nil
}

// parseIPv4 parses an IPv4 address.
func parseIPv4(noun, field, s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return netip.Addr{}, invalidf("%s %s %q is not an IPv4 address", noun, field, s)
	}
	return a, nil
}

// normIP returns the canonical text of an IP address (keys and filters).
func normIP(s string) (string, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return "", invalidf("%q is not an IP address", s)
	}
	return a.String(), nil
}

// parseCIDR parses an IPv4 network whose host bits are zero.
func parseCIDR(noun, s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil || !p.Addr().Is4() {
		return netip.Prefix{}, invalidf("%s CIDR %q is not an IPv4 network like 10.0.0.0/24", noun, s)
	}
	if p.Masked() != p {
		return netip.Prefix{}, invalidf("%s CIDR %q has host bits set (the network is %s)", noun, s, p.Masked())
	}
	return p, nil
}

// inPrefix parses an IPv4 address that must lie inside p.
func inPrefix(noun, field, s string, p netip.Prefix) (netip.Addr, error) {
	a, err := parseIPv4(noun, field, s)
	if err != nil {
		return a, err
	}
	if !p.Contains(a) {
		return a, invalidf("%s %s %s is outside %s", noun, field, s, p)
	}
	return a, nil
}

// validURL checks an absolute http(s) URL.
func validURL(noun, field, s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return invalidf("%s %s %q is not an http(s) URL", noun, field, s)
	}
	return nil
}

// uniqueStrings rejects empty and repeated entries of a list of names.
func uniqueStrings(noun, field string, list []string) error {
	seen := map[string]bool{}
	for _, v := range list {
		if v == "" {
			return invalidf("%s %s contains an empty entry", noun, field)
		}
		if seen[v] {
			return invalidf("%s %s lists %q twice", noun, field, v)
		}
		seen[v] = true
	}
	return nil
}

// uniqueNamed checks that every element of list has a name and that no two share one.
func uniqueNamed[T any](noun, field string, list []T, name func(T) string) error {
	names := make([]string, len(list))
	for i, v := range list {
		names[i] = name(v)
	}
	return uniqueStrings(noun, field+" names", names)
}

// nullable maps "" to SQL NULL for optional reference columns.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func emptyMeta(m *map[string]string) {
	if *m == nil {
		*m = map[string]string{}
	}
}
