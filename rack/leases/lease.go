// Package leases is the rack's DHCP lease table: in-memory indexes by address and by MAC,
// allocation from a subnet's dynamic range, a write-ahead log with group commit for
// durability, and batched upload of changed leases to the region.
package leases

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/ironflow/ironflow/region/api"
)

// State is the lifecycle state of a lease; the values are those of api.Lease.State.
type State string

// Lease states.
const (
	Active   State = "active"
	Released State = "released"
	Declined State = "declined" // the address is quarantined until Expires
	Expired  State = "expired"  // never stored: reported for an active lease past Expires
)

var stateCodes = []State{Active, Released, Declined}

// Lease is one binding of an address to a client.
type Lease struct {
	Addr       netip.Addr
	MAC        net.HardwareAddr
	Subnet     string // subnet UUID
	Hostname   string
	MachineRef string
	State      State
	Start      time.Time
	Expires    time.Time
}

// holds reports whether the lease keeps its address away from other clients at now.
func (l *Lease) holds(now time.Time) bool {
	return (l.State == Active || l.State == Declined) && now.Before(l.Expires)
}

// view returns the lease as callers see it: an active lease past its expiry is expired.
func (l *Lease) view(now time.Time) Lease {
	v := *l
	v.MAC = append(net.HardwareAddr(nil), l.MAC...)
	if v.State == Active && !now.Before(v.Expires) {
		v.State = Expired
	}
	return v
}

// API converts the lease to its wire form.
func (l Lease) API(rack string) api.Lease {
	return api.Lease{
		Addr:       l.Addr.String(),
		MAC:        l.MAC.String(),
		Subnet:     l.Subnet,
		Rack:       rack,
		Hostname:   l.Hostname,
		State:      string(l.State),
		Start:      l.Start.UTC(),
		Expires:    l.Expires.UTC(),
		MachineRef: l.MachineRef,
	}
}

// recordVersion is the first byte of every encoded lease record.
const recordVersion = 1

var errCorrupt = errors.New("corrupt lease record")

// appendRecord appends the binary form of l (the payload of a WAL record) to b.
func appendRecord(b []byte, l *Lease) []byte {
	b = append(b, recordVersion)
	a4 := l.Addr.As4()
	b = append(b, a4[:]...)
	b = append(b, stateCode(l.State))
	b = appendBytes(b, l.MAC)
	b = appendBytes(b, []byte(l.Subnet))
	b = appendBytes(b, []byte(l.Hostname))
	b = appendBytes(b, []byte(l.MachineRef))
	b = binary.AppendVarint(b, l.Start.UnixNano())
	return binary.AppendVarint(b, l.Expires.UnixNano())
}

func stateCode(s State) byte {
	for i, c := range stateCodes {
		if c == s {
			return byte(i)
		}
	}
	panic(fmt.Sprintf("leases: state %q is never stored", s))
}

func appendBytes(b, v []byte) []byte {
	return append(binary.AppendUvarint(b, uint64(len(v))), v...)
}

// decodeRecord parses a record payload written by appendRecord.
func decodeRecord(p []byte) (Lease, error) {
	var l Lease
	if len(p) < 6 || p[0] != recordVersion {
		return l, errCorrupt
	}
	l.Addr = netip.AddrFrom4([4]byte(p[1:5]))
	if int(p[5]) >= len(stateCodes) {
		return l, errCorrupt
	}
	l.State = stateCodes[p[5]]
	d := decoder{p: p[6:]}
	l.MAC = net.HardwareAddr(d.bytes())
	l.Subnet = string(d.bytes())
	l.Hostname = string(d.bytes())
	l.MachineRef = string(d.bytes())
	l.Start = time.Unix(0, d.varint())
	l.Expires = time.Unix(0, d.varint())
	if d.bad || len(d.p) != 0 {
		return Lease{}, errCorrupt
	}
	return l, nil
}

type decoder struct {
	p   []byte
	bad bool
}

func (d *decoder) bytes() []byte {
	n, k := binary.Uvarint(d.p)
	if k <= 0 || n > uint64(len(d.p)-k) {
		d.bad, d.p = true, nil
		return nil
	}
	v := append([]byte(nil), d.p[k:k+int(n)]...)
	d.p = d.p[k+int(n):]
	return v
}

func (d *decoder) varint() int64 {
	v, k := binary.Varint(d.p)
	if k <= 0 {
		d.bad, d.p = true, nil
		return 0
	}
	d.p = d.p[k:]
	return v
}
