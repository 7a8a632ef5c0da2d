package dns

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"unicode"

	mdns "github.com/miekg/dns"

	"github.com/ironflow/ironflow/region/api"
)

// maxTXT bounds a TXT record's text (it is split into strings of 255 octets).
const maxTXT = 4000

// Owner is the fully qualified owner name of an operator record.
func Owner(r api.DNSRecord) string {
	if r.Name == "@" {
		return fqdn(r.Domain)
	}
	return fqdn(r.Name + "." + r.Domain)
}

// CheckRecord validates an operator record on its own (its domain's existence is the
// store's to check) and returns it as a resource record with ttl. Data is parsed by type,
// never as zone-file text, so it cannot smuggle in other records.
func CheckRecord(r api.DNSRecord, ttl uint32) (mdns.RR, error) {
	if !slices.Contains(api.DNSRecordTypes, r.Type) {
		return nil, fmt.Errorf("Type %q is not one of %s", r.Type, strings.Join(api.DNSRecordTypes, ", "))
	}
	if err := CheckName(r.Domain, false); err != nil {
		return nil, fmt.Errorf("Domain: %w", err)
	}
	if r.Name != "@" {
		if err := CheckName(r.Name, true); err != nil {
			return nil, fmt.Errorf("Name: %w", err)
		}
	}
	if r.TTL < 0 || r.TTL > 1<<31-1 {
		return nil, fmt.Errorf("TTL %d is outside 0-2147483647", r.TTL)
	}
	if r.Type == "CNAME" && r.Name == "@" {
		return nil, fmt.Errorf("a CNAME cannot be at the domain itself (@)")
	}
	hdr := mdns.RR_Header{Name: Owner(r), Class: mdns.ClassINET, Ttl: ttl}
	switch r.Type {
	case "A", "AAAA":
		a, err := netip.ParseAddr(r.Data)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("Data %q is not an IP address", r.Data)
		}
		if r.Type == "A" {
			if !a.Is4() {
				return nil, fmt.Errorf("Data %q is not an IPv4 address (A)", r.Data)
			}
			hdr.Rrtype = mdns.TypeA
			return &mdns.A{Hdr: hdr, A: a.AsSlice()}, nil
		}
		if !a.Is6() || a.Is4In6() {
			return nil, fmt.Errorf("Data %q is not an IPv6 address (AAAA)", r.Data)
		}
		hdr.Rrtype = mdns.TypeAAAA
		return &mdns.AAAA{Hdr: hdr, AAAA: a.AsSlice()}, nil
	case "CNAME":
		target, err := hostName(r.Data)
		if err != nil {
			return nil, err
		}
		hdr.Rrtype = mdns.TypeCNAME
		return &mdns.CNAME{Hdr: hdr, Target: target}, nil
	case "TXT":
		if r.Data == "" || len(r.Data) > maxTXT {
			return nil, fmt.Errorf("Data holds %d octets: a TXT record holds 1-%d", len(r.Data), maxTXT)
		}
		if i := strings.IndexFunc(r.Data, func(c rune) bool { return unicode.IsControl(c) }); i >= 0 {
			return nil, fmt.Errorf("Data holds a control character at offset %d", i)
		}
		hdr.Rrtype = mdns.TypeTXT
		return &mdns.TXT{Hdr: hdr, Txt: txtStrings(r.Data)}, nil
	default: // SRV
		f := strings.Fields(r.Data)
		if len(f) != 4 {
			return nil, fmt.Errorf("Data %q: an SRV record is \"priority weight port target\"", r.Data)
		}
		var n [3]uint16
		for i, name := range []string{"priority", "weight", "port"} {
			v, err := strconv.ParseUint(f[i], 10, 16)
			if err != nil {
				return nil, fmt.Errorf("Data %q: %s %q is not a number in 0-65535", r.Data, name, f[i])
			}
			n[i] = uint16(v)
		}
		target, err := hostName(f[3])
		if err != nil {
			return nil, err
		}
		hdr.Rrtype = mdns.TypeSRV
		return &mdns.SRV{Hdr: hdr, Priority: n[0], Weight: n[1], Port: n[2], Target: target}, nil
	}
}

// hostName checks a target host name, absolute or not, and returns it fully qualified.
func hostName(s string) (string, error) {
	if err := CheckName(strings.TrimSuffix(s, "."), false); err != nil {
		return "", fmt.Errorf("Data: target %w", err)
	}
	return fqdn(s), nil
}

// txtStrings splits text into TXT strings of at most 255 octets, escaped as miekg/dns wants
// them (it reads backslash escapes when packing).
func txtStrings(text string) []string {
	out := chunks(text, 255)
	esc := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	for i := range out {
		out[i] = esc.Replace(out[i])
	}
	return out
}

// chunks splits s into strings of at most n octets, on UTF-8 boundaries.
func chunks(s string, n int) []string {
	var out []string
	for len(s) > n {
		cut := n
		for cut > 0 && !utf8Start(s[cut]) {
			cut--
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return append(out, s)
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
