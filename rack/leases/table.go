package leases

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ironflow/ironflow/region/api"
)

// Errors returned by the table. Each leaves the table unchanged.
var (
	ErrUnknownSubnet = errors.New("unknown subnet")
	ErrExhausted     = errors.New("no free address in the dynamic range")
	ErrNotOurs       = errors.New("address is neither in the dynamic range nor reserved for this client")
	ErrConflict      = errors.New("address is held by another client")
	ErrNoLease       = errors.New("client holds no lease on this address")
	ErrInvalid       = errors.New("invalid argument")
)

// Pool is what the table needs to know about a subnet.
type Pool struct {
	Subnet       string       // subnet UUID
	Prefix       netip.Prefix // the subnet's network
	RangeStart   netip.Addr   // dynamic range, inclusive; both zero: reservations only
	RangeEnd     netip.Addr
	Excluded     []netip.Addr // never handed out dynamically (gateway, static IPs)
	Reservations []Reservation
	LeaseTime    time.Duration
}

// Reservation binds a MAC to an address of the pool's subnet, inside or outside the range.
type Reservation struct {
	MAC        net.HardwareAddr
	Addr       netip.Addr
	Hostname   string
	MachineRef string
}

// maxRangeBits caps a dynamic range at a /8 so the bitmap stays at most 2 MiB.
const maxRangeBits = 1 << 24

type pool struct {
	Pool
	free      *rangeBits
	resByMAC  map[string]Reservation // key: string(MAC)
	resByAddr map[netip.Addr]Reservation
	excluded  map[netip.Addr]bool
	nextSweep time.Time // no stale bit can be reclaimed before this
}

func (p *pool) validate() error {
	switch {
	case p.Subnet == "":
		return fmt.Errorf("%w: pool without a subnet id", ErrInvalid)
	case !p.Prefix.IsValid() || !p.Prefix.Addr().Is4():
		return fmt.Errorf("%w: subnet %s: prefix %q is not IPv4", ErrInvalid, p.Subnet, p.Prefix)
	case p.LeaseTime <= 0:
		return fmt.Errorf("%w: subnet %s: lease time must be positive", ErrInvalid, p.Subnet)
	case !p.RangeStart.IsValid() && !p.RangeEnd.IsValid(): // reservations only
	case !p.Prefix.Contains(p.RangeStart) || !p.Prefix.Contains(p.RangeEnd) || p.RangeEnd.Less(p.RangeStart):
		return fmt.Errorf("%w: subnet %s: dynamic range %s-%s is not inside %s", ErrInvalid, p.Subnet, p.RangeStart, p.RangeEnd, p.Prefix)
	case u32(p.RangeEnd)-u32(p.RangeStart) >= maxRangeBits:
		return fmt.Errorf("%w: subnet %s: dynamic range larger than a /8", ErrInvalid, p.Subnet)
	}
	for _, r := range p.Reservations {
		if len(r.MAC) == 0 || !p.Prefix.Contains(r.Addr) {
			return fmt.Errorf("%w: subnet %s: reservation %s -> %s is not inside %s", ErrInvalid, p.Subnet, r.MAC, r.Addr, p.Prefix)
		}
	}
	return nil
}

type macKey struct {
	subnet string
	mac    string
}

type offer struct {
	subnet, mac string
	expires     time.Time
}

// Options configure a table.
type Options struct {
	Dir        string           // directory of the write-ahead log (required)
	Rack       string           // rack UUID written into exported leases
	OfferHold  time.Duration    // how long an offered address is kept for its client (default 30s)
	Quarantine time.Duration    // how long a declined address is not handed out (default 10m)
	CompactAt  int64            // log length that triggers compaction (default 8 MiB)
	Now        func() time.Time // clock (default time.Now)
	Logger     *slog.Logger
}

// Table holds the leases of one rack.
type Table struct {
	opts Options
	wal  *wal

	mu      sync.Mutex
	byAddr  map[netip.Addr]*Lease
	byMAC   map[macKey]*Lease
	pools   map[string]*pool
	offers  map[netip.Addr]offer
	offerOf map[macKey]netip.Addr   // the address currently offered to a client
	dirty   map[netip.Addr]struct{} // changed since the last upload
	changed chan struct{}           // signalled when dirty gains entries

	compacting   atomic.Bool
	snapshotSize atomic.Int64
}

// Open loads the table from the log in opts.Dir. A torn last record is dropped (logged).
// Leases replayed from the log are queued for upload to the region.
func Open(opts Options) (*Table, error) {
	if opts.Dir == "" {
		return nil, fmt.Errorf("%w: Options.Dir is required", ErrInvalid)
	}
	if opts.OfferHold <= 0 {
		opts.OfferHold = 30 * time.Second
	}
	if opts.Quarantine <= 0 {
		opts.Quarantine = 10 * time.Minute
	}
	if opts.CompactAt <= 0 {
		opts.CompactAt = 8 << 20
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	w, payloads, torn, err := openWAL(opts.Dir)
	if err != nil {
		return nil, err
	}
	if torn {
		opts.Logger.Warn("lease log had a torn tail; dropped it", "dir", opts.Dir, "records", len(payloads))
	}
	t := &Table{
		opts:    opts,
		wal:     w,
		byAddr:  map[netip.Addr]*Lease{},
		byMAC:   map[macKey]*Lease{},
		pools:   map[string]*pool{},
		offers:  map[netip.Addr]offer{},
		offerOf: map[macKey]netip.Addr{},
		dirty:   map[netip.Addr]struct{}{},
		changed: make(chan struct{}, 1),
	}
	cleaned := 0
	for i, p := range payloads {
		l, err := decodeRecord(p)
		if err != nil {
			w.close()
			return nil, fmt.Errorf("lease log record %d: %w", i, err)
		}
		if h := CleanHostname(l.Hostname); h != l.Hostname {
			l.Hostname = h // logged by a version that stored client names as sent
			cleaned++
		}
		t.apply(&l)
	}
	for a := range t.byAddr {
		t.dirty[a] = struct{}{} // the region may have missed the last changes before a crash
	}
	if len(t.dirty) > 0 {
		t.changed <- struct{}{}
	}
	t.snapshotSize.Store(w.length())
	if cleaned > 0 {
		// Rewrite the log so that the raw names do not outlive this start.
		opts.Logger.Warn("lease log held invalid host names; cleaned them", "records", cleaned)
		if err := t.Compact(); err != nil {
			w.close()
			return nil, err
		}
	}
	return t, nil
}

// Close makes pending records durable and closes the log.
func (t *Table) Close() error {
	return t.wal.close()
}

// Configure replaces the pools (subnets) the table allocates from. Leases of subnets no
// longer configured are kept (and exported) but no longer renewed.
func (t *Table) Configure(pools []Pool) error {
	next := make(map[string]*pool, len(pools))
	for _, cfg := range pools {
		p := &pool{Pool: cfg}
		if err := p.validate(); err != nil {
			return err
		}
		if _, dup := next[p.Subnet]; dup {
			return fmt.Errorf("%w: subnet %s configured twice", ErrInvalid, p.Subnet)
		}
		p.free = newRangeBits(p.RangeStart, p.RangeEnd)
		p.resByMAC = make(map[string]Reservation, len(p.Reservations))
		p.resByAddr = make(map[netip.Addr]Reservation, len(p.Reservations))
		for _, r := range p.Reservations {
			if other, dup := p.resByAddr[r.Addr]; dup && !bytes.Equal(other.MAC, r.MAC) {
				return fmt.Errorf("%w: subnet %s: %s reserved for both %s and %s", ErrInvalid, p.Subnet, r.Addr, other.MAC, r.MAC)
			}
			p.resByMAC[string(r.MAC)] = r
			p.resByAddr[r.Addr] = r
		}
		p.excluded = make(map[netip.Addr]bool, len(p.Excluded))
		for _, a := range p.Excluded {
			p.excluded[a] = true
		}
		next[p.Subnet] = p
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pools = next
	now := t.opts.Now()
	for _, p := range next {
		t.rebuild(p, now)
	}
	return nil
}

// rebuild recomputes a pool's bitmap from reservations, exclusions, leases and offers.
func (t *Table) rebuild(p *pool, now time.Time) {
	p.free.reset()
	p.nextSweep = time.Time{}
	for a := range p.excluded {
		p.free.set(a)
	}
	for a := range p.resByAddr {
		p.free.set(a)
	}
	for a, l := range t.byAddr {
		if l.Subnet == p.Subnet && l.holds(now) {
			p.hold(a, l.Expires)
		}
	}
	for a, o := range t.offers {
		if o.subnet == p.Subnet && now.Before(o.expires) {
			p.hold(a, o.expires)
		}
	}
}

// hold marks a as taken until expires.
func (p *pool) hold(a netip.Addr, expires time.Time) {
	p.free.set(a)
	if p.nextSweep.IsZero() || expires.Before(p.nextSweep) {
		p.nextSweep = expires
	}
}

// unhold frees a unless it is reserved or excluded.
func (p *pool) unhold(a netip.Addr) {
	if _, reserved := p.resByAddr[a]; !reserved && !p.excluded[a] {
		p.free.clear(a)
	}
}

// apply installs l as the record for its address and indexes it by MAC.
func (t *Table) apply(l *Lease) {
	if old := t.byAddr[l.Addr]; old != nil {
		k := macKey{old.Subnet, string(old.MAC)}
		if t.byMAC[k] == old {
			delete(t.byMAC, k)
		}
	}
	t.byAddr[l.Addr] = l
	if l.State != Declined {
		t.byMAC[macKey{l.Subnet, string(l.MAC)}] = l
	}
}

// write applies l, logs it and queues it for upload; it returns the log sequence to wait for.
func (t *Table) write(l *Lease) uint64 {
	t.apply(l)
	t.dirty[l.Addr] = struct{}{}
	select {
	case t.changed <- struct{}{}:
	default:
	}
	return t.wal.append(l)
}

func (t *Table) pool(subnet string) (*pool, error) {
	p := t.pools[subnet]
	if p == nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownSubnet, subnet)
	}
	return p, nil
}

// heldByOther reports whether a lease or offer of another client keeps a at now.
func (t *Table) heldByOther(a netip.Addr, mac string, now time.Time) bool {
	if l := t.byAddr[a]; l != nil && l.holds(now) && (string(l.MAC) != mac || l.State == Declined) {
		return true
	}
	o, ok := t.offers[a]
	return ok && o.mac != mac && now.Before(o.expires)
}

// usable reports whether a may be given to mac in p: it is reserved for mac, or it is a
// dynamic address not reserved for anyone else, not excluded, and not held by another client.
func (t *Table) usable(p *pool, a netip.Addr, mac string, now time.Time) error {
	if r, ok := p.resByAddr[a]; ok {
		if string(r.MAC) != mac {
			return fmt.Errorf("%s: %w (reserved)", a, ErrConflict)
		}
	} else if !p.free.contains(a) || p.excluded[a] {
		return fmt.Errorf("%s: %w", a, ErrNotOurs)
	}
	if t.heldByOther(a, mac, now) {
		return fmt.Errorf("%s: %w", a, ErrConflict)
	}
	return nil
}

// Offer picks an address for mac in subnet and holds it for the client for OfferHold.
// Preference: the client's reservation, its current or previous address, the address it
// asked for, then the next free address of the dynamic range. Nothing is logged: an offer
// is not a lease.
func (t *Table) Offer(subnet string, mac net.HardwareAddr, requested netip.Addr) (netip.Addr, error) {
	if len(mac) == 0 {
		return netip.Addr{}, fmt.Errorf("%w: empty MAC", ErrInvalid)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	p, err := t.pool(subnet)
	if err != nil {
		return netip.Addr{}, err
	}
	now := t.opts.Now()
	a, err := t.choose(p, string(mac), requested, now)
	if err != nil {
		return netip.Addr{}, err
	}
	expires := now.Add(t.opts.OfferHold)
	t.offers[a] = offer{subnet: subnet, mac: string(mac), expires: expires}
	t.offerOf[macKey{subnet, string(mac)}] = a
	p.hold(a, expires)
	return a, nil
}

func (t *Table) choose(p *pool, mac string, requested netip.Addr, now time.Time) (netip.Addr, error) {
	if r, ok := p.resByMAC[mac]; ok {
		if t.usable(p, r.Addr, mac, now) == nil {
			return r.Addr, nil
		}
		t.opts.Logger.Warn("reserved address is held by another client; offering from the dynamic range",
			"subnet", p.Subnet, "mac", net.HardwareAddr(mac), "addr", r.Addr)
	}
	k := macKey{p.Subnet, mac}
	if l := t.byMAC[k]; l != nil && t.usable(p, l.Addr, mac, now) == nil {
		return l.Addr, nil
	}
	if a, ok := t.offerOf[k]; ok && t.usable(p, a, mac, now) == nil {
		return a, nil // a retransmitted DISCOVER gets the same offer
	}
	if requested.IsValid() && t.usable(p, requested, mac, now) == nil {
		return requested, nil
	}
	if a, ok := p.free.next(); ok {
		t.dropOffer(a) // expired: its bit was cleared by a sweep
		return a, nil
	}
	if !p.nextSweep.IsZero() && !now.Before(p.nextSweep) {
		t.sweep(p, now)
		if a, ok := p.free.next(); ok {
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("subnet %s: %w", p.Subnet, ErrExhausted)
}

func (t *Table) dropOffer(a netip.Addr) {
	o, ok := t.offers[a]
	if !ok {
		return
	}
	delete(t.offers, a)
	if k := (macKey{o.subnet, o.mac}); t.offerOf[k] == a {
		delete(t.offerOf, k)
	}
}

// sweep clears the bits of expired holds in p and recomputes when the next one expires.
func (t *Table) sweep(p *pool, now time.Time) {
	for a, o := range t.offers {
		if o.subnet == p.Subnet && !now.Before(o.expires) {
			t.dropOffer(a)
		}
	}
	t.rebuild(p, now)
}

// Grant binds addr to mac in subnet for the pool's lease time, or renews the binding, and
// returns once the lease is durable. A previous active lease of mac in the subnet on
// another address is released. The client's hostname is kept as CleanHostname makes it.
func (t *Table) Grant(subnet string, mac net.HardwareAddr, addr netip.Addr, hostname string) (Lease, error) {
	if len(mac) == 0 || !addr.Is4() {
		return Lease{}, fmt.Errorf("%w: MAC %q, address %s", ErrInvalid, mac, addr)
	}
	t.mu.Lock()
	p, err := t.pool(subnet)
	if err != nil {
		t.mu.Unlock()
		return Lease{}, err
	}
	now := t.opts.Now()
	if err := t.usable(p, addr, string(mac), now); err != nil {
		t.mu.Unlock()
		return Lease{}, err
	}
	var seq uint64
	if prev := t.byMAC[macKey{subnet, string(mac)}]; prev != nil && prev.Addr != addr && prev.holds(now) {
		rel := *prev
		rel.State, rel.Expires = Released, now
		seq = t.write(&rel)
		p.unhold(rel.Addr)
	}
	l := &Lease{Addr: addr, MAC: append(net.HardwareAddr(nil), mac...), Subnet: subnet, Hostname: CleanHostname(hostname),
		State: Active, Start: now, Expires: now.Add(p.LeaseTime)}
	if cur := t.byAddr[addr]; cur != nil && cur.State == Active && now.Before(cur.Expires) && bytes.Equal(cur.MAC, mac) {
		l.Start = cur.Start // a renewal keeps the lease's start
	}
	if r, ok := p.resByAddr[addr]; ok {
		l.Hostname, l.MachineRef = r.Hostname, r.MachineRef
	}
	t.dropOffer(addr)
	p.hold(addr, l.Expires)
	seq = t.write(l)
	v := l.view(now)
	t.mu.Unlock()

	if err := t.wal.wait(seq); err != nil {
		return Lease{}, err
	}
	t.maybeCompact()
	return v, nil
}

// Release ends mac's lease on addr; the address becomes free at once.
func (t *Table) Release(subnet string, mac net.HardwareAddr, addr netip.Addr) error {
	return t.end(subnet, mac, addr, func(l *Lease, p *pool, now time.Time) {
		l.State, l.Expires = Released, now
		p.unhold(l.Addr)
	})
}

// Decline records that mac found addr in use by someone else: the address is quarantined
// for Options.Quarantine and the client gets another one next time.
func (t *Table) Decline(subnet string, mac net.HardwareAddr, addr netip.Addr) error {
	return t.end(subnet, mac, addr, func(l *Lease, p *pool, now time.Time) {
		l.State, l.Start, l.Expires = Declined, now, now.Add(t.opts.Quarantine)
		p.hold(l.Addr, l.Expires)
	})
}

// end applies change to a copy of mac's lease (or offer) on addr and logs it.
func (t *Table) end(subnet string, mac net.HardwareAddr, addr netip.Addr, change func(*Lease, *pool, time.Time)) error {
	t.mu.Lock()
	p, err := t.pool(subnet)
	if err != nil {
		t.mu.Unlock()
		return err
	}
	now := t.opts.Now()
	var l Lease
	if cur := t.byAddr[addr]; cur != nil && bytes.Equal(cur.MAC, mac) && cur.State == Active {
		l = *cur
	} else if o, ok := t.offers[addr]; ok && o.mac == string(mac) {
		l = Lease{Addr: addr, MAC: append(net.HardwareAddr(nil), mac...), Subnet: subnet, Start: now}
	} else {
		t.mu.Unlock()
		return fmt.Errorf("%s by %s: %w", addr, mac, ErrNoLease)
	}
	t.dropOffer(addr)
	change(&l, p, now)
	seq := t.write(&l)
	t.mu.Unlock()
	return t.wal.wait(seq)
}

// Lookup returns the lease record of addr.
func (t *Table) Lookup(addr netip.Addr) (Lease, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.byAddr[addr]
	if l == nil {
		return Lease{}, false
	}
	return l.view(t.opts.Now()), true
}

// LookupMAC returns the latest lease of mac in subnet.
func (t *Table) LookupMAC(subnet string, mac net.HardwareAddr) (Lease, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.byMAC[macKey{subnet, string(mac)}]
	if l == nil {
		return Lease{}, false
	}
	return l.view(t.opts.Now()), true
}

// Export returns every lease record, ordered by address (for transfer-rack).
func (t *Table) Export() []api.Lease {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.opts.Now()
	addrs := make([]netip.Addr, 0, len(t.byAddr))
	for a := range t.byAddr {
		addrs = append(addrs, a)
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	out := make([]api.Lease, len(addrs))
	for i, a := range addrs {
		out[i] = t.byAddr[a].view(now).API(t.opts.Rack)
	}
	return out
}

// maybeCompact compacts once the log has grown well past the last snapshot.
func (t *Table) maybeCompact() {
	n := t.wal.length()
	if n < t.opts.CompactAt || n < 4*t.snapshotSize.Load() || !t.compacting.CompareAndSwap(false, true) {
		return
	}
	defer t.compacting.Store(false)
	if err := t.Compact(); err != nil {
		t.opts.Logger.Error("lease log compaction failed", "error", err)
	}
}

// Compact rewrites the log as one record per address. DHCP waits while it runs.
func (t *Table) Compact() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var frames []byte
	for _, l := range t.byAddr {
		frames = appendLeaseFrame(frames, l)
	}
	if err := t.wal.replace(frames); err != nil {
		return err
	}
	t.snapshotSize.Store(t.wal.length())
	return nil
}
