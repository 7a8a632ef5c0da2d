package syslog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/ironflow/ironflow/internal/syslogmsg"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/region/api"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var clientMAC = net.HardwareAddr{0x52, 0x54, 0, 0, 0, 1}

// region plays the region's syslog route: it stores what it is sent, or fails while down.
type region struct {
	mu        sync.Mutex
	down      bool
	refuse    bool // answer as a region refusing the batch's content
	checkSize bool // count posts whose JSON is over the region's body limit
	got       []api.SyslogMessage
	nPosts    int
	nTooBig   int
}

func (r *region) PostSyslog(_ context.Context, batch []api.SyslogMessage) (api.SyslogSyncResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.down && r.checkSize {
		r.nPosts++
		if doc, _ := json.Marshal(batch); len(doc) > 1<<20 {
			r.nTooBig++
		}
	}
	switch {
	case r.down:
		return api.SyslogSyncResult{}, errors.New("region unreachable")
	case r.refuse:
		return api.SyslogSyncResult{}, fmt.Errorf("%w: 422", ErrBatchRefused)
	}
	res := api.SyslogSyncResult{}
	for i, m := range batch {
		if m.Text == "reject me" {
			res.Rejected = append(res.Rejected, api.SyslogRejection{Index: i, Reason: "no_machine", Error: "no machine"})
			continue
		}
		r.got = append(r.got, m)
		res.Stored++
	}
	return res, nil
}

func (r *region) posts() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nPosts
}

func (r *region) tooBig() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nTooBig
}

func (r *region) set(down, refuse bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down, r.refuse = down, refuse
}

func (r *region) messages() []api.SyslogMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

func (r *region) texts() []string {
	var out []string
	for _, m := range r.messages() {
		out = append(out, m.Text)
	}
	return out
}

// receiver is a Server on 127.0.0.1 that attributes 127.0.0.1 only, with its forwarder.
type receiver struct {
	srv    *Server
	region *region
	reg    *prometheus.Registry
}

func startReceiver(t *testing.T, cfg Config, fo ForwarderOptions) *receiver {
	t.Helper()
	r := &receiver{region: &region{}, reg: prometheus.NewRegistry()}
	m, err := NewMetrics(r.reg)
	if err != nil {
		t.Fatal(err)
	}
	fo.Interval, fo.RetryDelay, fo.Logger = 10*time.Millisecond, 10*time.Millisecond, quiet
	fwd := NewForwarder(r.region, m, fo)
	cfg.Addr, cfg.Forwarder, cfg.Metrics = "127.0.0.1:0", fwd, m
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	if cfg.Attribute == nil {
		cfg.Attribute = func(a netip.Addr) (net.HardwareAddr, bool) {
			return clientMAC, a == netip.MustParseAddr("127.0.0.1")
		}
	}
	if r.srv, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- r.srv.Serve(ctx) }()
	go func() { done <- fwd.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		}
	})
	return r
}

// metric reads a counter or gauge of the receiver, by name and label value ("" for none).
func (r *receiver) metric(t *testing.T, name, label string) float64 {
	t.Helper()
	families, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if label == "" || slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetValue() == label }) {
				if m.Counter != nil {
					return m.GetCounter().GetValue()
				}
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

func (r *receiver) dial(t *testing.T, network string, from string) net.Conn {
	t.Helper()
	d := net.Dialer{}
	if from != "" {
		if network == "udp" {
			d.LocalAddr = &net.UDPAddr{IP: net.ParseIP(from)}
		} else {
			d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
		}
	}
	c, err := d.Dial(network, r.srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func write(t *testing.T, c net.Conn, s string) {
	t.Helper()
	if _, err := io.WriteString(c, s); err != nil {
		t.Fatal(err)
	}
}

// TestReceiveUDPAndTCPFraming: messages over UDP, octet-counted and newline-framed TCP (LF
// and CRLF, split across writes) reach the region in order of arrival per transport, with
// their fields parsed and control characters escaped; garbage, overlong lines and messages
// from an address no lease or reservation names are dropped and counted, and the connection
// goes on after them.
func TestReceiveUDPAndTCPFraming(t *testing.T) {
	r := startReceiver(t, Config{}, ForwarderOptions{})
	udp := r.dial(t, "udp", "")
	write(t, udp, "<34>Oct 11 22:14:15 node su[12]: over udp\n")
	testutil.Eventually(t, 5*time.Second, "the UDP message at the region", func() bool { return len(r.region.texts()) == 1 })

	tcp := r.dial(t, "tcp", "")
	m1, m2 := "<165>1 2026-12-01T14:59:58Z node app 7 ID1 - counted one", "<13>1 - - - - - - counted \x07two\x00three"
	write(t, tcp, fmt.Sprintf("%d %s%d %s", len(m1), m1, len(m2), m2))
	write(t, tcp, "<13>app: newline\r\nnot syslog at all\n")
	write(t, tcp, "<13>"+strings.Repeat("x", syslogmsg.MaxLine)+"\n")
	write(t, tcp, "<13>app: after the long")
	write(t, tcp, " line\n\n")
	unknown := r.dial(t, "udp", "127.0.0.2")
	write(t, unknown, "<13>app: from an address with no lease")

	want := []string{"over udp", "counted one", `counted \x07two\x00three`, "newline", "after the long line"}
	testutil.Eventually(t, 5*time.Second, "every good message at the region", func() bool { return slices.Equal(r.region.texts(), want) })
	got := r.region.messages()[1]
	if got.Addr != "127.0.0.1" || got.MAC != clientMAC.String() || got.Facility != 20 || got.Severity != 5 || got.Hostname != "node" ||
		got.App != "app" || got.ProcID != "7" || got.MsgID != "ID1" || !got.Time.Equal(time.Date(2026, 12, 1, 14, 59, 58, 0, time.UTC)) || got.Received.IsZero() {
		t.Errorf("parsed message %+v", got)
	}
	testutil.Eventually(t, 5*time.Second, "the drops counted", func() bool {
		return r.metric(t, "ironflow_syslog_dropped_total", DropMalformed) == 1 && r.metric(t, "ironflow_syslog_dropped_total", DropTooLong) == 1 &&
			r.metric(t, "ironflow_syslog_dropped_total", DropUnattributed) == 1
	})
	if udp, tcp := r.metric(t, "ironflow_syslog_received_total", "udp"), r.metric(t, "ironflow_syslog_received_total", "tcp"); udp != 2 || tcp != 6 {
		t.Errorf("received udp %v tcp %v, want 2 and 6", udp, tcp)
	}
}

// TestDropsAreNotALogLineEach: a flood of messages the rack drops, logged at debug, makes at
// most one log line every dropLogInterval, not one line per message.
func TestDropsAreNotALogLineEach(t *testing.T) {
	var log testutil.SafeBuffer
	r := startReceiver(t, Config{Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))}, ForwarderOptions{})
	start := time.Now()
	unknown := r.dial(t, "tcp", "127.0.0.2")
	const n = 1000
	write(t, unknown, strings.Repeat("<13>app: from an address with no lease\n", n))
	testutil.Eventually(t, 5*time.Second, "the flood dropped", func() bool {
		return r.metric(t, "ironflow_syslog_dropped_total", DropUnattributed) == n
	})
	most := 1 + int(time.Since(start)/dropLogInterval)
	if lines := strings.Count(log.String(), "syslog message dropped"); lines < 1 || lines > most {
		t.Errorf("%d log lines of %d dropped messages, want 1 to %d:\n%s", lines, n, most, log.String())
	}
}

// TestBadOctetCountClosesTheConnection: a frame announcing more than the line limit cannot be
// skipped safely, so the connection ends (counted as too_long).
func TestBadOctetCountClosesTheConnection(t *testing.T) {
	r := startReceiver(t, Config{}, ForwarderOptions{})
	c := r.dial(t, "tcp", "")
	write(t, c, fmt.Sprintf("%d <13>x", syslogmsg.MaxLine+1))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("read after a bad frame: %v, want EOF", err)
	}
	if n := r.metric(t, "ironflow_syslog_dropped_total", DropTooLong); n != 1 {
		t.Fatalf("too_long %v, want 1", n)
	}
}

// TestFloodIsBounded: with the region down, a flood fills the buffer to its bound and every
// message beyond it is dropped and counted; when the region is back the buffer drains.
func TestFloodIsBounded(t *testing.T) {
	r := startReceiver(t, Config{}, ForwarderOptions{MaxBuffered: 100, BatchSize: 30})
	r.region.set(true, false)
	c := r.dial(t, "tcp", "")
	var flood strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&flood, "<13>app: flood %d\n", i)
	}
	write(t, c, flood.String())
	testutil.Eventually(t, 10*time.Second, "1000 messages received", func() bool { return r.metric(t, "ironflow_syslog_received_total", "tcp") == 1000 })
	if full, depth := r.metric(t, "ironflow_syslog_dropped_total", DropBufferFull), r.metric(t, "ironflow_syslog_buffer_depth", ""); full != 900 || depth != 100 {
		t.Fatalf("buffer_full %v, depth %v, want 900 and 100", full, depth)
	}
	r.region.set(false, false)
	testutil.Eventually(t, 10*time.Second, "the buffer delivered", func() bool { return len(r.region.texts()) == 100 })
	if texts := r.region.texts(); texts[0] != "flood 0" || texts[99] != "flood 99" {
		t.Fatalf("delivered %s .. %s, want the oldest 100", texts[0], texts[99])
	}
}

// TestRegionRefusals: messages the region rejects one by one and batches it refuses whole are
// dropped and counted, never sent again.
func TestRegionRefusals(t *testing.T) {
	r := startReceiver(t, Config{}, ForwarderOptions{})
	c := r.dial(t, "tcp", "")
	write(t, c, "<13>app: kept\n<13>app: reject me\n")
	testutil.Eventually(t, 5*time.Second, "one stored, one rejected", func() bool {
		return len(r.region.texts()) == 1 && r.metric(t, "ironflow_syslog_dropped_total", DropRejected) == 1
	})
	r.region.set(false, true)
	write(t, c, "<13>app: refused batch\n")
	testutil.Eventually(t, 5*time.Second, "the batch refused", func() bool { return r.metric(t, "ironflow_syslog_dropped_total", DropRefused) == 1 })
	r.region.set(false, false)
	write(t, c, "<13>app: later\n")
	testutil.Eventually(t, 5*time.Second, "the next message stored", func() bool { return slices.Equal(r.region.texts(), []string{"kept", "later"}) })
}

// TestConnectionLimits: connections beyond the per-client and the total limits are closed at
// once and counted; an idle connection is closed after the idle timeout.
func TestConnectionLimits(t *testing.T) {
	r := startReceiver(t, Config{MaxConns: 3, MaxConnsPerClient: 2, IdleTimeout: 300 * time.Millisecond}, ForwarderOptions{})
	closed := func(c net.Conn, within time.Duration) bool {
		c.SetReadDeadline(time.Now().Add(within))
		_, err := c.Read(make([]byte, 1))
		return errors.Is(err, io.EOF)
	}
	// Keep two of 127.0.0.1 busy so that the idle timeout does not close them first.
	a, b := r.dial(t, "tcp", "127.0.0.1"), r.dial(t, "tcp", "127.0.0.1")
	write(t, a, "<13>app: a\n")
	write(t, b, "<13>app: b\n")
	testutil.Eventually(t, 5*time.Second, "a and b admitted", func() bool { return len(r.region.texts()) == 2 })
	if !closed(r.dial(t, "tcp", "127.0.0.1"), 2*time.Second) {
		t.Fatal("a third connection of one client stayed open")
	}
	third := r.dial(t, "tcp", "127.0.0.3")
	write(t, third, "<13>app: c\n")
	if !closed(r.dial(t, "tcp", "127.0.0.4"), 2*time.Second) {
		t.Fatal("a fourth connection stayed open")
	}
	if pc, tot := r.metric(t, "ironflow_syslog_connections_refused_total", RefusePerClient), r.metric(t, "ironflow_syslog_connections_refused_total", RefuseTotal); pc != 1 || tot < 1 {
		t.Fatalf("refused per client %v, total %v", pc, tot)
	}
	if !closed(a, 5*time.Second) {
		t.Fatal("an idle connection stayed open")
	}
}

// TestBatchesFitTheRegionBodyLimit: long messages full of escaped control characters go in
// several posts, each under the region's 1 MiB body limit, and all arrive.
func TestBatchesFitTheRegionBodyLimit(t *testing.T) {
	r := startReceiver(t, Config{}, ForwarderOptions{MaxBuffered: 1000})
	r.region.set(true, false)
	c := r.dial(t, "tcp", "")
	long := "<13>app: " + strings.Repeat("\x01", syslogmsg.MaxLine-20)
	for range 200 {
		write(t, c, fmt.Sprintf("%d %s", len(long), long))
	}
	testutil.Eventually(t, 10*time.Second, "200 messages buffered", func() bool { return r.metric(t, "ironflow_syslog_buffer_depth", "") == 200 })
	r.region.mu.Lock()
	r.region.checkSize = true
	r.region.mu.Unlock()
	r.region.set(false, false)
	testutil.Eventually(t, 10*time.Second, "200 messages delivered", func() bool { return len(r.region.texts()) == 200 })
	if r.region.tooBig() > 0 || r.region.posts() < 2 {
		t.Fatalf("%d posts, %d over 1 MiB", r.region.posts(), r.region.tooBig())
	}
}

// TestTCPPortTakenIsAnErrorAndFreesUDP: a configured port whose TCP side someone else holds
// is refused with the reason, and the UDP socket opened first is given back.
func TestTCPPortTakenIsAnErrorAndFreesUDP(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	addr := taken.Addr().String()
	cfg := Config{Addr: addr, Metrics: m, Logger: quiet, Forwarder: NewForwarder(&region{}, m, ForwarderOptions{Logger: quiet}),
		Attribute: func(netip.Addr) (net.HardwareAddr, bool) { return nil, false }}
	if _, err := New(cfg); !errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(err.Error(), "syslog TCP") {
		t.Fatalf("New on a taken TCP port: %v, want syslog TCP: address in use", err)
	}
	udp, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatalf("the UDP port was not given back: %v", err)
	}
	udp.Close()
}

// TestOneClientsFloodIsLimitedAndOthersPass: past its burst a client gets RatePerClient
// messages a second, the rest dropped as rate_limited; another client's messages still pass.
func TestOneClientsFloodIsLimitedAndOthersPass(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	attribute := func(a netip.Addr) (net.HardwareAddr, bool) {
		return clientMAC, a == netip.MustParseAddr("127.0.0.1") || a == netip.MustParseAddr("127.0.0.3")
	}
	r := startReceiver(t, Config{RatePerClient: 1, BurstPerClient: 3, Now: clock, Attribute: attribute}, ForwarderOptions{})
	flood := r.dial(t, "tcp", "")
	for i := range 6 {
		write(t, flood, fmt.Sprintf("<13>app: flood %d\n", i))
	}
	testutil.Eventually(t, 5*time.Second, "the flood past its burst dropped", func() bool {
		return r.metric(t, "ironflow_syslog_dropped_total", DropRateLimited) == 3
	})
	other := r.dial(t, "udp", "127.0.0.3")
	write(t, other, "<13>app: from another machine")
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	write(t, flood, "<13>app: a second later\n")
	want := []string{"flood 0", "flood 1", "flood 2", "from another machine", "a second later"}
	testutil.Eventually(t, 5*time.Second, "the burst, the other client and the refilled message at the region", func() bool {
		return slices.Equal(slices.Sorted(slices.Values(r.region.texts())), slices.Sorted(slices.Values(want)))
	})
	if n := r.metric(t, "ironflow_syslog_dropped_total", DropRateLimited); n != 3 {
		t.Errorf("rate_limited drops %v, want 3", n)
	}
}

// refusedConns is how many TCP connections the receiver refused, under any limit.
func (r *receiver) refusedConns(t *testing.T) float64 {
	t.Helper()
	families, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() == "ironflow_syslog_connections_refused_total" {
			for _, m := range f.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

// floodConns opens perAddr TCP connections from each of addrs loopback addresses starting at
// 127.0.2.1 (none attributed) and sends one message on each; it returns once the receiver
// has either refused each connection or read its message.
func (r *receiver) floodConns(t *testing.T, addrs, perAddr int) {
	t.Helper()
	for i := range addrs {
		from := netip.AddrFrom4([4]byte{127, 0, 2, byte(1 + i)}).String()
		for range perAddr {
			write(t, r.dial(t, "tcp", from), "<13>app: holding a slot\n")
		}
	}
	testutil.Eventually(t, 10*time.Second, "every flood connection refused or read", func() bool {
		return r.refusedConns(t)+r.metric(t, "ironflow_syslog_dropped_total", DropUnattributed) == float64(addrs*perAddr)
	})
}

// TestUnattributedFloodLeavesAttributedClientsASlot: connections from addresses the rack
// serves no client on (111 addresses, 4 connections each, more than the 256 slots) cannot
// take the slots of the clients it serves: those beyond their own small budget are refused,
// and a served client's TCP message still arrives.
func TestUnattributedFloodLeavesAttributedClientsASlot(t *testing.T) {
	r := startReceiver(t, Config{}, ForwarderOptions{})
	r.floodConns(t, 111, 4)
	write(t, r.dial(t, "tcp", "127.0.0.1"), "<13>app: from a served machine\n")
	testutil.Eventually(t, 5*time.Second, "the served machine's message at the region", func() bool {
		return slices.Equal(r.region.texts(), []string{"from a served machine"})
	})
}

// TestServedClientTakesTheSlotOfTheLongestSilentUnattributed: when every slot is held, a
// client of the rack closes the unattributed connection silent the longest and takes its
// slot; a connection whose address has become a client's since it connected is not taken.
func TestServedClientTakesTheSlotOfTheLongestSilentUnattributed(t *testing.T) {
	var leased sync.Map // addresses that became attributed after connecting
	attribute := func(a netip.Addr) (net.HardwareAddr, bool) {
		_, late := leased.Load(a)
		return clientMAC, a == netip.MustParseAddr("127.0.0.1") || late
	}
	r := startReceiver(t, Config{MaxConns: 3, MaxUnattributedConns: 3, Attribute: attribute}, ForwarderOptions{})
	var conns []net.Conn
	for i, from := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"} {
		c := r.dial(t, "tcp", from)
		write(t, c, "<13>app: unattributed\n")
		testutil.Eventually(t, 5*time.Second, "the connection read", func() bool {
			return r.metric(t, "ironflow_syslog_dropped_total", DropUnattributed) == float64(i+1)
		})
		conns = append(conns, c)
	}
	leased.Store(netip.MustParseAddr("127.0.0.2"), true) // the oldest is a client's now
	write(t, r.dial(t, "tcp", "127.0.0.1"), "<13>app: from a served machine\n")
	testutil.Eventually(t, 5*time.Second, "the served machine's message at the region", func() bool {
		return slices.Equal(r.region.texts(), []string{"from a served machine"})
	})
	conns[1].SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conns[1].Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("the longest-silent unattributed connection: read %v, want EOF", err)
	}
	if n := r.metric(t, "ironflow_syslog_connections_evicted_total", ""); n != 1 {
		t.Fatalf("evicted %v, want 1", n)
	}
	write(t, conns[0], "<13>app: leased since\n")
	testutil.Eventually(t, 5*time.Second, "the message of the connection leased since", func() bool {
		return len(r.region.texts()) == 2
	})
}

// TestFormatCharactersArriveEscaped: bidi controls, zero-width and line separator characters
// reach the region escaped in every field, like control characters, so that no line shows
// differently from what it holds.
func TestFormatCharactersArriveEscaped(t *testing.T) {
	r := startReceiver(t, Config{}, ForwarderOptions{})
	write(t, r.dial(t, "udp", ""), "<13>1 - evil\u202ehost app\u200b - - - invoice\u202efdp.exe\u202c\u2028ok")
	testutil.Eventually(t, 5*time.Second, "the message at the region", func() bool { return len(r.region.messages()) == 1 })
	if m := r.region.messages()[0]; m.Hostname != `evil\u202ehost` || m.App != `app\u200b` || m.Text != `invoice\u202efdp.exe\u202c\u2028ok` {
		t.Fatalf("stored host %q app %q text %q, want format characters escaped", m.Hostname, m.App, m.Text)
	}
}
