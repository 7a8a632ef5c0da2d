package leases

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
)

// rangeBits is a bitmap over an inclusive IPv4 range: a set bit means the address may not be
// handed out (held, offered, quarantined, reserved or excluded). A clear bit always means
// free; a set bit may be stale (its hold expired) until the next sweep.
type rangeBits struct {
	first, n uint32 // first address and number of addresses
	words    []uint64
	cursor   uint32 // next-fit: the search starts here, so allocation is O(1) amortised
}

// newRangeBits covers start..end; with invalid addresses (no dynamic range) it is empty.
func newRangeBits(start, end netip.Addr) *rangeBits {
	if !start.IsValid() {
		return &rangeBits{}
	}
	first, last := u32(start), u32(end)
	n := last - first + 1
	return &rangeBits{first: first, n: n, words: make([]uint64, (uint64(n)+63)/64)}
}

func u32(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

func addrOf(v uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

// index returns the bit of a, or false when a is outside the range.
func (r *rangeBits) index(a netip.Addr) (uint32, bool) {
	if !a.Is4() {
		return 0, false
	}
	i := u32(a) - r.first
	return i, u32(a) >= r.first && i < r.n
}

func (r *rangeBits) contains(a netip.Addr) bool {
	_, ok := r.index(a)
	return ok
}

func (r *rangeBits) set(a netip.Addr) {
	if i, ok := r.index(a); ok {
		r.words[i/64] |= 1 << (i % 64)
	}
}

func (r *rangeBits) clear(a netip.Addr) {
	if i, ok := r.index(a); ok {
		r.words[i/64] &^= 1 << (i % 64)
	}
}

func (r *rangeBits) reset() {
	clear(r.words)
}

// next returns a free address at or after the cursor (wrapping once) and advances the
// cursor past it. Full words are skipped 64 addresses at a time.
func (r *rangeBits) next() (netip.Addr, bool) {
	if r.n == 0 {
		return netip.Addr{}, false
	}
	nw := uint32(len(r.words))
	start := r.cursor % r.n
	for k := uint32(0); k <= nw; k++ {
		w := (start/64 + k) % nw
		free := ^r.words[w]
		if k == 0 {
			free &^= (1 << (start % 64)) - 1 // bits before the cursor are visited last
		}
		if w == nw-1 && r.n%64 != 0 {
			free &= (1 << (r.n % 64)) - 1 // bits past the end of the range
		}
		if free != 0 {
			i := w*64 + uint32(bits.TrailingZeros64(free))
			r.cursor = (i + 1) % r.n
			return addrOf(r.first + i), true
		}
	}
	return netip.Addr{}, false
}
