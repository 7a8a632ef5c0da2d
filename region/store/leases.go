package store

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/region/api"
)

var leaseStates = []string{"active", "released", "declined", "expired"}

// Leases have no UUID: they are addressed as Addr:<ip> (unique per subnet).
var leases = newKind(kind[api.Lease]{
	name: api.KindLeases, noun: "lease", table: "leases",
	self: func(l *api.Lease) *string { return &l.Addr },
	keys: map[string]string{
		"Addr":   "addr = $1::inet",
		"MAC":    "mac = $1",
		"Subnet": "subnet = $1::uuid",
	},
	norm:  map[string]func(string) (string, error){"Addr": normIP, "MAC": normMAC, "Subnet": normUUID},
	order: "seq",
	columns: func(l *api.Lease) []column {
		return []column{{"subnet", l.Subnet}, {"addr", l.Addr}, {"mac", l.MAC}}
	},
	validate: validateLease,
	check: func(ctx context.Context, tx pgx.Tx, l, _ *api.Lease) error {
		var cidr netip.Prefix
		err := tx.QueryRow(ctx, "SELECT cidr FROM subnets WHERE uuid = $1", l.Subnet).Scan(&cidr)
		if errors.Is(err, pgx.ErrNoRows) {
			return invalidf("subnet %q does not exist", l.Subnet)
		}
		if err != nil {
			return err
		}
		_, err = inPrefix("lease", "Addr", l.Addr, cidr)
		return err
	},
})

func validateLease(l *api.Lease) error {
	a, err := parseIPv4("lease", "Addr", l.Addr)
	if err != nil {
		return err
	}
	l.Addr = a.String()
	noun := "lease " + l.Addr
	if l.MAC, err = normMAC(l.MAC); err != nil {
		return invalidf("%s MAC %v", noun, err)
	}
	if err := canonUUID(noun, "Subnet", &l.Subnet, false); err != nil {
		return err
	}
	if err := optionalUUIDs(noun, map[string]*string{"Rack": &l.Rack, "MachineRef": &l.MachineRef}); err != nil {
		return err
	}
	if err := validHostname(noun, l.Hostname); err != nil {
		return err
	}
	if !slices.Contains(leaseStates, l.State) {
		return invalidf("%s State %q is not one of %v", noun, l.State, leaseStates)
	}
	if !l.Start.IsZero() && !l.Expires.IsZero() && l.Expires.Before(l.Start) {
		return invalidf("%s Expires %s is before Start %s", noun, l.Expires, l.Start)
	}
	return nil
}

// maxHostname bounds a lease's Hostname: DHCP option 12 holds at most 255 bytes.
const maxHostname = 255

// validHostname refuses what a client's DHCP hostname option may carry but a name may not:
// invalid UTF-8, control characters (NUL included, which PostgreSQL text cannot hold) and
// more than maxHostname bytes.
func validHostname(noun, h string) error {
	switch {
	case len(h) > maxHostname:
		return invalidf("%s Hostname is %d bytes long, more than %d", noun, len(h), maxHostname)
	case !utf8.ValidString(h):
		return invalidf("%s Hostname %q is not valid UTF-8", noun, h)
	case strings.ContainsFunc(h, unicode.IsControl):
		return invalidf("%s Hostname %q contains control characters", noun, h)
	}
	return nil
}
