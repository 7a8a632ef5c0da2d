package store

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/ironflow/ironflow/region/api"
)

var fabrics = newKind(kind[api.Fabric]{
	name: api.KindFabrics, noun: "fabric", table: "fabrics",
	self:    func(f *api.Fabric) *string { return &f.Uuid },
	genUUID: true, bare: "uuid",
	keys:    map[string]string{"Uuid": "uuid = $1::uuid", "Name": "name = $1"},
	norm:    map[string]func(string) (string, error){"Uuid": normUUID},
	order:   "name, seq",
	columns: func(f *api.Fabric) []column { return []column{{"uuid", f.Uuid}, {"name", f.Name}} },
	validate: func(f *api.Fabric) error {
		return validName("fabric", f.Name, false)
	},
	deps: []dependents{"SELECT 'vlan ' || " + vlanLabelSQL + " FROM vlans WHERE fabric = $1::uuid ORDER BY vid"},
})

// vlanLabelSQL and vlanLabel describe a VLAN by name, or by VID when it has none.
const vlanLabelSQL = "CASE WHEN name <> '' THEN name ELSE 'VID ' || vid END"

func vlanLabel(v *api.VLAN) string {
	if v.Name != "" {
		return v.Name
	}
	return fmt.Sprintf("VID %d", v.VID)
}

var vlans = newKind(kind[api.VLAN]{
	name: api.KindVLANs, noun: "vlan", table: "vlans",
	self:    func(v *api.VLAN) *string { return &v.Uuid },
	genUUID: true, bare: "uuid",
	keys: map[string]string{
		"Uuid":          "uuid = $1::uuid",
		"Name":          "name = $1",
		"Fabric":        "fabric = $1::uuid",
		"PrimaryRack":   "primary_rack = $1::uuid",
		"SecondaryRack": "secondary_rack = $1::uuid",
	},
	norm: map[string]func(string) (string, error){
		"Uuid": normUUID, "Fabric": normUUID, "PrimaryRack": normUUID, "SecondaryRack": normUUID,
	},
	order: "name, vid, seq",
	columns: func(v *api.VLAN) []column {
		return []column{{"uuid", v.Uuid}, {"name", v.Name}, {"fabric", v.Fabric}, {"vid", v.VID},
			{"primary_rack", nullable(v.PrimaryRack)}, {"secondary_rack", nullable(v.SecondaryRack)}}
	},
	validate: validateVLAN,
	deps:     []dependents{"SELECT 'subnet ' || cidr FROM subnets WHERE vlan = $1::uuid ORDER BY cidr"},
})

func validateVLAN(v *api.VLAN) error {
	noun := "vlan " + vlanLabel(v)
	if v.Name != "" {
		if err := validName("vlan", v.Name, false); err != nil {
			return err
		}
	}
	if err := canonUUID(noun, "Fabric", &v.Fabric, false); err != nil {
		return err
	}
	if err := optionalUUIDs(noun, map[string]*string{"PrimaryRack": &v.PrimaryRack, "SecondaryRack": &v.SecondaryRack}); err != nil {
		return err
	}
	switch {
	case v.VID < 0 || v.VID > 4094:
		return invalidf("%s VID %d is outside 0-4094", noun, v.VID)
	case v.MTU != 0 && (v.MTU < 552 || v.MTU > 65535):
		return invalidf("%s MTU %d is outside 552-65535", noun, v.MTU)
	case v.SecondaryRack != "" && v.PrimaryRack == "":
		return invalidf("%s has a SecondaryRack but no PrimaryRack", noun)
	case v.SecondaryRack != "" && v.SecondaryRack == v.PrimaryRack:
		return invalidf("%s PrimaryRack and SecondaryRack are the same rack", noun)
	case v.DHCPOn && v.PrimaryRack == "":
		return invalidf("%s serves DHCP (DHCPOn) but has no PrimaryRack", noun)
	}
	return nil
}

var subnets = newKind(kind[api.Subnet]{
	name: api.KindSubnets, noun: "subnet", table: "subnets",
	self:    func(s *api.Subnet) *string { return &s.Uuid },
	genUUID: true, bare: "uuid",
	keys: map[string]string{
		"Uuid": "uuid = $1::uuid",
		"Name": "name = $1",
		"CIDR": "cidr = $1::cidr",
		"VLAN": "vlan = $1::uuid",
	},
	norm: map[string]func(string) (string, error){"Uuid": normUUID, "VLAN": normUUID, "CIDR": func(s string) (string, error) {
		p, err := parseCIDR("subnet", s)
		return p.String(), err
	}},
	order: "name, seq",
	columns: func(s *api.Subnet) []column {
		return []column{{"uuid", s.Uuid}, {"name", s.Name}, {"cidr", s.CIDR}, {"vlan", nullable(s.VLAN)}}
	},
	prepare: func(s, old *api.Subnet) {
		switch {
		case old != nil:
			s.Created = old.Created
		case s.Created.IsZero():
			s.Created = time.Now().UTC()
		}
		if s.DNSServers == nil {
			s.DNSServers = []string{}
		}
		if s.ReservedIPs == nil {
			s.ReservedIPs = []string{}
		}
	},
	validate: validateSubnet,
	// Leases go with their subnet (ON DELETE CASCADE): they are records of the rack's DHCP
	// state, not objects an operator manages.
})

func validateSubnet(s *api.Subnet) error {
	if err := validName("subnet", s.Name, false); err != nil {
		return err
	}
	noun := "subnet " + s.Name
	p, err := parseCIDR(noun, s.CIDR)
	if err != nil {
		return err
	}
	s.CIDR = p.String()
	if err := canonUUID(noun, "VLAN", &s.VLAN, true); err != nil {
		return err
	}
	if s.Gateway != "" {
		if _, err := inPrefix(noun, "Gateway", s.Gateway, p); err != nil {
			return err
		}
	}
	for _, d := range s.DNSServers {
		if _, err := parseIPv4(noun, "DNSServers", d); err != nil {
			return err
		}
	}
	if s.NextServer != "" {
		if _, err := parseIPv4(noun, "NextServer", s.NextServer); err != nil {
			return err
		}
	}
	if err := validProxyParent(noun, "ProxyParent", s.ProxyParent); err != nil {
		return err
	}
	if err := validRange(noun, s.DynamicRange, p); err != nil {
		return err
	}
	for _, r := range s.ReservedIPs {
		if _, err := inPrefix(noun, "ReservedIPs", r, p); err != nil {
			return err
		}
	}
	if err := uniqueStrings(noun, "ReservedIPs", s.ReservedIPs); err != nil {
		return err
	}
	if s.LeaseSeconds < 0 {
		return invalidf("%s LeaseSeconds %d is negative", noun, s.LeaseSeconds)
	}
	return nil
}

// validRange checks a dynamic range: empty, or Start <= End, both usable hosts of p.
func validRange(noun string, r api.IPRange, p netip.Prefix) error {
	if r.Start == "" && r.End == "" {
		return nil
	}
	start, err := inPrefix(noun, "DynamicRange.Start", r.Start, p)
	if err != nil {
		return err
	}
	end, err := inPrefix(noun, "DynamicRange.End", r.End, p)
	if err != nil {
		return err
	}
	if end.Less(start) {
		return invalidf("%s DynamicRange %s-%s ends before it starts", noun, r.Start, r.End)
	}
	if p.Bits() < 31 && (start == p.Addr() || end == lastAddr(p)) {
		return invalidf("%s DynamicRange %s-%s includes the network or broadcast address of %s", noun, r.Start, r.End, p)
	}
	return nil
}

func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := (uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])) | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
