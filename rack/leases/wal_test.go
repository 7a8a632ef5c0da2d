package leases

import (
	"encoding/binary"
	"hash/crc32"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/ironflow/ironflow/region/api"
)

func bigPool() Pool {
	p := testPool()
	p.Prefix = netip.MustParsePrefix("10.0.0.0/16")
	p.RangeStart, p.RangeEnd = addr("10.0.1.0"), addr("10.0.255.255")
	return p
}

// TestGrantedLeasesSurviveReopen grants concurrently, then opens a second table on the
// same directory without closing the first: every acknowledged grant must be on disk.
func TestGrantedLeasesSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	c := newClock()
	tb := openTable(t, dir, c, bigPool())
	var wg sync.WaitGroup
	for i := range 300 {
		wg.Go(func() { grant(t, tb, mac(i)) })
	}
	wg.Wait()
	l := grant(t, tb, mac(1000))
	if err := tb.Release(subnetID, mac(1000), l.Addr); err != nil {
		t.Fatal(err)
	}
	l = grant(t, tb, mac(1001))
	if err := tb.Decline(subnetID, mac(1001), l.Addr); err != nil {
		t.Fatal(err)
	}

	want := tb.Export()
	again := openTable(t, dir, c, bigPool())
	if got := again.Export(); !reflect.DeepEqual(got, want) {
		t.Fatalf("reopened table has %d leases, want %d\ngot  %+v\nwant %+v", len(got), len(want), got[:min(3, len(got))], want[:min(3, len(want))])
	}
	if _, err := again.Grant(subnetID, mac(2000), netip.MustParseAddr(want[0].Addr), ""); err == nil {
		t.Fatal("a replayed lease did not keep its address from another client")
	}
}

func walPath(dir string) string { return filepath.Join(dir, walName) }

func TestTornTailIsDropped(t *testing.T) {
	dir := t.TempDir()
	c := newClock()
	tb := openTable(t, dir, c, bigPool())
	for i := range 5 {
		grant(t, tb, mac(i))
	}
	before := tb.Export()
	last := grant(t, tb, mac(5))
	all := tb.Export()
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(walPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	_, end, _ := parseFrames(data)
	lastFrame := int64(frameHeader + len(appendRecord(nil, &last)))

	cases := []struct {
		name   string
		damage func([]byte) []byte
		want   []api.Lease
	}{
		{"cut inside the payload", func(d []byte) []byte { return d[:end-3] }, before},
		{"cut inside the header", func(d []byte) []byte { return d[:end-lastFrame+3] }, before},
		{"flipped payload byte", func(d []byte) []byte { d[end-2] ^= 0xff; return d }, before},
		{"half a frame after the end", func(d []byte) []byte { return append(d[:end], 7, 0, 0, 0, 1, 2, 3) }, all},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(walPath(dir), tc.damage(append([]byte(nil), data...)), 0o640); err != nil {
				t.Fatal(err)
			}
			tb := openTable(t, dir, c, bigPool())
			if got := tb.Export(); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %d leases, want %d", len(got), len(tc.want))
			}
			// The log keeps working after the cut, and the new record is not shadowed by
			// the bytes that were dropped.
			l := grant(t, tb, mac(77))
			if err := tb.Close(); err != nil {
				t.Fatal(err)
			}
			again := openTable(t, dir, c, bigPool())
			if got, ok := again.Lookup(l.Addr); !ok || got.State != Active {
				t.Fatalf("lease granted after the repair is lost: %+v", got)
			}
		})
	}
}

func TestCompactionBoundsTheLog(t *testing.T) {
	dir := t.TempDir()
	c := newClock()
	tb, err := Open(Options{Dir: dir, Rack: "rack-1", Now: c.Now, CompactAt: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	if err := tb.Configure([]Pool{bigPool()}); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		grant(t, tb, mac(i))
	}
	for range 60 { // renewals rewrite the same 20 leases (concurrently: one sync per round)
		c.Advance(time.Minute)
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				l, _ := tb.LookupMAC(subnetID, mac(i))
				if _, err := tb.Grant(subnetID, mac(i), l.Addr, ""); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	if n := tb.wal.length(); n > 16<<10 {
		t.Fatalf("log is %d bytes after 1200 renewals of 20 leases; compaction did not run", n)
	}
	want := tb.Export()
	again := openTable(t, dir, c, bigPool())
	if got := again.Export(); !reflect.DeepEqual(got, want) {
		t.Fatalf("state after compaction differs:\ngot  %+v\nwant %+v", got, want)
	}
}

func TestCorruptRecordInsideAValidFrameIsAnError(t *testing.T) {
	dir := t.TempDir()
	frame := []byte{3, 0, 0, 0, 0, 0, 0, 0, 9, 9, 9}
	binary.LittleEndian.PutUint32(frame[4:], crc32.Checksum(frame[8:], crcTable))
	if err := os.WriteFile(walPath(dir), frame, 0o640); err != nil {
		t.Fatal(err)
	}
	if tb, err := Open(Options{Dir: dir}); err == nil {
		tb.Close()
		t.Fatal("a checksummed frame holding garbage was accepted")
	}
}

func TestRecordRoundTrip(t *testing.T) {
	c := newClock()
	in := Lease{Addr: addr("10.1.2.3"), MAC: mac(7), Subnet: subnetID, Hostname: "h", MachineRef: "m",
		State: Declined, Start: c.Now(), Expires: c.Now().Add(time.Hour)}
	out, err := decodeRecord(appendRecord(nil, &in))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out.API("r"), in.API("r")) {
		t.Fatalf("round trip: %+v != %+v", out, in)
	}
	rec := appendRecord(nil, &in)
	for n := range len(rec) {
		if _, err := decodeRecord(rec[:n]); err == nil {
			t.Fatalf("truncated record of %d/%d bytes decoded", n, len(rec))
		}
	}
}

func TestRangeBitsNextFit(t *testing.T) {
	r := newRangeBits(addr("10.0.0.0"), addr("10.0.0.69")) // 70 bits: a partial second word
	var got []netip.Addr
	for {
		a, ok := r.next()
		if !ok {
			break
		}
		r.set(a)
		got = append(got, a)
	}
	if len(got) != 70 || got[0] != addr("10.0.0.0") || got[69] != addr("10.0.0.69") {
		t.Fatalf("allocated %d addresses, first %v last %v", len(got), got[0], got[len(got)-1])
	}
	r.clear(addr("10.0.0.5"))
	r.clear(addr("10.0.0.66"))
	if a, _ := r.next(); a != addr("10.0.0.5") { // cursor wrapped past the end
		t.Fatalf("next after wrap = %s, want 10.0.0.5", a)
	}
	if a, _ := r.next(); a != addr("10.0.0.66") {
		t.Fatalf("next = %s, want 10.0.0.66", a)
	}
	if r.contains(addr("10.0.0.70")) || r.contains(addr("9.255.255.255")) {
		t.Fatal("contains reports addresses outside the range")
	}
}
