package dns

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"

	mdns "github.com/miekg/dns"

	"github.com/ironflow/ironflow/region/api"
)

// Host is a machine's name and one of its addresses (its reservation or an active lease).
type Host struct {
	Name string
	Addr netip.Addr
}

// Data is the region data the zones derive from, read in one snapshot so that every region
// process reading the same database builds the same zones.
type Data struct {
	Serial  uint32 // the revision of this data (store: the DNS change counter)
	Domains []api.Domain
	Records []api.DNSRecord
	Hosts   []Host
	Subnets []netip.Prefix
}

// SOA timers of every zone (seconds).
const (
	soaRefresh = 60
	soaRetry   = 30
	soaExpire  = 86400
)

// Zones are the region's authoritative zones, built from one Data.
type Zones struct {
	Serial  uint32
	Default string // the default domain, fully qualified; "" when there is none
	byName  map[string]*zone
	origins []string // longest first, so the most specific zone wins
	// Skipped counts machines left out because their name is not a valid host name.
	Skipped int
}

type zone struct {
	origin string
	ttl    uint32
	soa    *mdns.SOA
	names  map[string][]mdns.RR // by owner, in build order
	inner  map[string]bool      // names with data below them (empty non-terminals included)
}

// DefaultDomain is the domain machines' names go in: the one marked Default, else the first
// by name; "" when the region has none.
func DefaultDomain(domains []api.Domain) string {
	if i := slices.IndexFunc(domains, func(d api.Domain) bool { return d.Default }); i >= 0 {
		return strings.ToLower(domains[i].Name)
	}
	if len(domains) == 0 {
		return ""
	}
	return strings.ToLower(slices.MinFunc(domains, func(a, b api.Domain) int { return cmp.Compare(a.Name, b.Name) }).Name)
}

// ReverseZone is the reverse zone that holds the addresses of p: in-addr.arpa on the octet
// boundary at or above p's prefix length (ip6.arpa on the nibble boundary).
func ReverseZone(p netip.Prefix) string {
	p = p.Masked()
	rev, _ := mdns.ReverseAddr(p.Addr().String()) // a valid address always reverses
	labels := mdns.SplitDomainName(rev)
	var keep int
	if p.Addr().Is4() {
		keep = max(p.Bits()/8, 1)
		return strings.Join(labels[4-keep:], ".") + "."
	}
	keep = max(p.Bits()/4, 1)
	return strings.Join(labels[32-keep:], ".") + "."
}

// ZoneNames are the zones of the data, fully qualified and sorted: every domain and the
// reverse zone of every subnet.
func ZoneNames(domains []api.Domain, subnets []netip.Prefix) []string {
	var out []string
	for _, d := range domains {
		out = append(out, fqdn(d.Name))
	}
	for _, p := range subnets {
		out = append(out, ReverseZone(p))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func ttlOf(seconds int) uint32 {
	if seconds <= 0 {
		return api.DefaultDNSTTL
	}
	return uint32(seconds)
}

// Build derives the zones from d. Data that cannot be served is left out, never an error: a
// machine whose name is not a host name (counted in Skipped), a record of a domain that is
// gone, and a CNAME whose owner has other data.
func Build(d Data) *Zones {
	z := &Zones{Serial: d.Serial, byName: map[string]*zone{}}
	if def := DefaultDomain(d.Domains); def != "" {
		z.Default = fqdn(def)
	}
	ttls := map[string]uint32{}
	for _, dom := range d.Domains {
		ttls[fqdn(dom.Name)] = ttlOf(dom.TTL)
	}
	for _, name := range ZoneNames(d.Domains, d.Subnets) {
		ttl, ok := ttls[name]
		if !ok {
			ttl = api.DefaultDNSTTL
		}
		z.byName[name] = newZone(name, ttl, d.Serial)
		z.origins = append(z.origins, name)
	}
	slices.SortFunc(z.origins, func(a, b string) int { return cmp.Compare(len(b), len(a)) })

	for _, h := range d.Hosts {
		z.addHost(h)
	}
	for _, r := range d.Records {
		zn := z.byName[fqdn(r.Domain)]
		if zn == nil {
			continue
		}
		ttl := zn.ttl
		if r.TTL > 0 {
			ttl = uint32(r.TTL)
		}
		if rr, err := CheckRecord(r, ttl); err == nil {
			zn.add(rr)
		}
	}
	for _, zn := range z.byName {
		zn.dropShadowedCNAMEs()
	}
	return z
}

func newZone(origin string, ttl, serial uint32) *zone {
	soa := &mdns.SOA{
		Hdr: mdns.RR_Header{Name: origin, Rrtype: mdns.TypeSOA, Class: mdns.ClassINET, Ttl: ttl},
		Ns:  origin, Mbox: "hostmaster." + origin, Serial: serial,
		Refresh: soaRefresh, Retry: soaRetry, Expire: soaExpire, Minttl: ttl,
	}
	zn := &zone{origin: origin, ttl: ttl, soa: soa, names: map[string][]mdns.RR{}, inner: map[string]bool{}}
	zn.add(soa)
	zn.add(&mdns.NS{Hdr: mdns.RR_Header{Name: origin, Rrtype: mdns.TypeNS, Class: mdns.ClassINET, Ttl: ttl}, Ns: origin})
	return zn
}

// addHost gives a machine its forward record in the default domain and its PTR in the
// reverse zone of its address.
func (z *Zones) addHost(h Host) {
	if z.Default == "" || !h.Addr.IsValid() {
		return
	}
	if CheckName(h.Name, false) != nil {
		z.Skipped++
		return
	}
	name := fqdn(h.Name) + z.Default
	fwd := z.byName[z.Default]
	hdr := mdns.RR_Header{Name: name, Class: mdns.ClassINET, Ttl: fwd.ttl}
	if h.Addr.Is4() {
		hdr.Rrtype = mdns.TypeA
		fwd.add(&mdns.A{Hdr: hdr, A: h.Addr.AsSlice()})
	} else {
		hdr.Rrtype = mdns.TypeAAAA
		fwd.add(&mdns.AAAA{Hdr: hdr, AAAA: h.Addr.AsSlice()})
	}
	rev, _ := mdns.ReverseAddr(h.Addr.String())
	if zn := z.zoneOf(rev); zn != nil {
		zn.add(&mdns.PTR{Hdr: mdns.RR_Header{Name: rev, Rrtype: mdns.TypePTR, Class: mdns.ClassINET, Ttl: zn.ttl}, Ptr: name})
	}
}

func (zn *zone) add(rr mdns.RR) {
	owner := strings.ToLower(rr.Header().Name)
	if slices.ContainsFunc(zn.names[owner], func(o mdns.RR) bool { return mdns.IsDuplicate(o, rr) }) {
		return
	}
	zn.names[owner] = append(zn.names[owner], rr)
	for n := owner; n != zn.origin; {
		i := strings.IndexByte(n, '.')
		n = n[i+1:]
		zn.inner[n] = true
	}
}

// dropShadowedCNAMEs removes CNAMEs whose owner has other data (a CNAME must be alone).
func (zn *zone) dropShadowedCNAMEs() {
	for owner, rrs := range zn.names {
		if len(rrs) > 1 && slices.ContainsFunc(rrs, isCNAME) {
			zn.names[owner] = slices.DeleteFunc(rrs, isCNAME)
		}
	}
}

func isCNAME(rr mdns.RR) bool { return rr.Header().Rrtype == mdns.TypeCNAME }

// Origins are the zones' names, longest first.
func (z *Zones) Origins() []string { return slices.Clone(z.origins) }

// zoneOf returns the zone name is in, or nil.
func (z *Zones) zoneOf(name string) *zone {
	name = strings.ToLower(name)
	for _, o := range z.origins {
		if mdns.IsSubDomain(o, name) {
			return z.byName[o]
		}
	}
	return nil
}

// maxChase bounds how many CNAMEs an answer follows.
const maxChase = 8

// Answer answers req authoritatively: the records asked for (following CNAMEs inside the
// region's zones), NODATA or NXDOMAIN with the zone's SOA, a whole zone for AXFR, and
// REFUSED for names outside the zones.
func (z *Zones) Answer(req *mdns.Msg) *mdns.Msg {
	m := new(mdns.Msg)
	m.SetReply(req)
	m.RecursionAvailable = false
	switch {
	case req.Opcode != mdns.OpcodeQuery:
		return m.SetRcode(req, mdns.RcodeNotImplemented)
	case len(req.Question) != 1:
		return m.SetRcode(req, mdns.RcodeFormatError)
	}
	q := req.Question[0]
	zn := z.zoneOf(q.Name)
	if zn == nil || q.Qclass != mdns.ClassINET {
		return m.SetRcode(req, mdns.RcodeRefused)
	}
	m.Authoritative = true
	switch q.Qtype {
	case mdns.TypeAXFR, mdns.TypeIXFR:
		m.Answer = zn.transfer()
		return m
	}
	z.resolve(m, zn, strings.ToLower(q.Name), q.Qtype, 0)
	return m
}

func (z *Zones) resolve(m *mdns.Msg, zn *zone, name string, qtype uint16, depth int) {
	rrs, exists := zn.names[name]
	if !exists {
		if !zn.inner[name] {
			m.Rcode = mdns.RcodeNameError
		}
		m.Ns = []mdns.RR{zn.soa}
		return
	}
	var matched []mdns.RR
	for _, rr := range rrs {
		if qtype == mdns.TypeANY || rr.Header().Rrtype == qtype {
			matched = append(matched, rr)
		}
	}
	if len(matched) > 0 {
		m.Answer = append(m.Answer, matched...)
		return
	}
	if i := slices.IndexFunc(rrs, isCNAME); i >= 0 {
		cname := rrs[i].(*mdns.CNAME)
		m.Answer = append(m.Answer, cname)
		if target := z.zoneOf(cname.Target); target != nil && depth < maxChase {
			z.resolve(m, target, cname.Target, qtype, depth+1)
		}
		return
	}
	m.Ns = []mdns.RR{zn.soa}
}

// transfer is the zone as AXFR sends it: SOA, every other record by owner, SOA.
func (zn *zone) transfer() []mdns.RR {
	owners := make([]string, 0, len(zn.names))
	for o := range zn.names {
		owners = append(owners, o)
	}
	slices.Sort(owners)
	out := []mdns.RR{zn.soa}
	for _, o := range owners {
		for _, rr := range zn.names[o] {
			if rr != zn.soa {
				out = append(out, rr)
			}
		}
	}
	return append(out, zn.soa)
}
