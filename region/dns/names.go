// Package dns is the region's authoritative DNS: it builds the zones of the region's data
// (its domains, machines with an address, reverse zones of its subnets and the operators'
// records) and answers queries from them, over UDP and TCP (--dns-listen) and over HTTP for
// the racks (api.DNSQueryPath).
package dns

import (
	"errors"
	"fmt"
	"strings"

	mdns "github.com/miekg/dns"
)

// CheckName checks a domain name in presentation form, without a trailing dot: dot-separated
// labels of letters, digits and hyphens, 1-63 octets each, not starting or ending with a
// hyphen, at most 253 octets in all. service allows labels that start with an underscore
// (SRV and TXT owners such as _ldap._tcp). Upper case is accepted; names compare without case.
func CheckName(name string, service bool) error {
	if name == "" {
		return errors.New("empty name")
	}
	if len(name) > 253 {
		return fmt.Errorf("name %q is longer than 253 octets", name)
	}
	for _, label := range strings.Split(name, ".") {
		if err := checkLabel(label, service); err != nil {
			return fmt.Errorf("name %q: %w", name, err)
		}
	}
	return nil
}

func checkLabel(label string, service bool) error {
	switch {
	case label == "":
		return errors.New("empty label")
	case len(label) > 63:
		return fmt.Errorf("label %q is longer than 63 octets", label)
	case label[0] == '-' || label[len(label)-1] == '-':
		return fmt.Errorf("label %q starts or ends with a hyphen", label)
	}
	for i := 0; i < len(label); i++ {
		c := label[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-':
		case c == '_' && service && i == 0:
		default:
			return fmt.Errorf("label %q holds %q: only letters, digits and hyphens are allowed", label, c)
		}
	}
	return nil
}

// ValidQueryName reports whether a query name (fully qualified, as miekg/dns decodes it) is
// made of valid labels; underscores are allowed anywhere (service names, and resolvers that
// probe with them), escapes (bytes outside printable ASCII, dots inside a label) are not.
func ValidQueryName(fqdn string) bool {
	if fqdn == "." {
		return true
	}
	if !mdns.IsFqdn(fqdn) || strings.ContainsRune(fqdn, '\\') {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(fqdn, "."), ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// fqdn is name lower-cased and fully qualified.
func fqdn(name string) string { return mdns.Fqdn(strings.ToLower(name)) }
