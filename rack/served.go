package rack

import (
	"net/netip"
	"slices"
)

// Serves says whether addr is in a subnet of the rack's config: the clients it boots. TFTP
// answers no one else, so a forged source address cannot aim its files at a third party.
func (a *applier) Serves(addr netip.Addr) bool {
	return slices.ContainsFunc(*a.served.Load(), func(p netip.Prefix) bool { return p.Contains(addr) })
}
