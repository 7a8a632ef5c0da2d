package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/internal/syslogmsg"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

// servingRack gives s a rack serving 10.0.0.0/24, which may post the syslog of a machine no
// rack holds (birdy of the seed has no Rack and no Address).
func servingRack(t *testing.T, s *store.Store, rack string) {
	t.Helper()
	mustCreate(t, s, api.KindRacks, &api.Rack{Uuid: rack, Name: "rack-" + rack[len(rack)-1:], Status: api.RackOnline})
	mustCreate(t, s, api.KindFabrics, &api.Fabric{Uuid: fabric1, Name: "fabric-1"})
	mustCreate(t, s, api.KindVLANs, &api.VLAN{Uuid: vlan1, Fabric: fabric1, VID: 10, Name: "v10", DHCPOn: true, PrimaryRack: rack})
	mustCreate(t, s, api.KindSubnets, &api.Subnet{Uuid: subnet1, Name: "s1", CIDR: "10.0.0.0/24", VLAN: vlan1,
		Gateway: "10.0.0.1", DynamicRange: api.IPRange{Start: "10.0.0.100", End: "10.0.0.200"}})
}

// syslogSource is seedSource with birdy given a MAC, by which a rack's syslog finds it.
func syslogSource(t *testing.T) (region, api.Machine) {
	t.Helper()
	src, birdy, _ := seedSource(t)
	birdy.HardwareAddrs = []string{"52:54:00:00:05:01"}
	if err := src.s.Replace(context.Background(), alice, api.KindMachines, birdy.Uuid, &birdy); err != nil {
		t.Fatal(err)
	}
	return src, birdy
}

// postSyslog stores texts as rack's messages from mac, received a second apart from at.
func postSyslog(t *testing.T, s *store.Store, rack, mac string, at time.Time, texts ...string) {
	t.Helper()
	batch := make([]api.SyslogMessage, len(texts))
	for i, text := range texts {
		batch[i] = api.SyslogMessage{Addr: "10.0.0.7", MAC: mac, Received: at.Add(time.Duration(i) * time.Second), Facility: 3, Severity: 6,
			Hostname: "birdy", App: "kernel", Text: text}
	}
	res, err := s.SyncSyslog(context.Background(), alice, rack, batch)
	if err != nil || res.Stored != len(texts) {
		t.Fatalf("sync syslog: %+v, %v", res, err)
	}
}

// machineSyslog is what `machines logs` shows of machine on s: each line with its receipt
// time and rack, oldest first.
func machineSyslog(t *testing.T, s *store.Store, machine string) []string {
	t.Helper()
	msgs, err := s.Syslog(context.Background(), store.SyslogQuery{Machine: machine})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = fmt.Sprintf("%s %s %s %s", m.Received.Format(time.RFC3339Nano), m.Rack, m.Addr, m.Text)
	}
	return out
}

// moveTicket is a ticket spent for migration, which then holds the copy it imports.
func moveTicket(id, migration string) store.TicketUse {
	u := ticketUse(id)
	u.Migration = migration
	return u
}

func sameLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%s:\n%s\nwant\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestSyslogMovesWithItsMachine: the syslog a machine's rack posted on the source moves with
// the machine, in order, with its receipt times and rack; new lines on the target follow it.
// An import retried stores nothing twice, its undo (delete or redirect of the copy) removes
// what it added and nothing else, and a machine moving back finds its old lines there once.
func TestSyslogMovesWithItsMachine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, birdy := syslogSource(t)
	dst := seedDestination(t)
	id, mac := birdy.Uuid, birdy.HardwareAddrs[0]
	servingRack(t, src.s, rackA)
	servingRack(t, dst.s, rackB)
	at := time.Date(2026, 3, 1, 10, 0, 0, 123456789, time.UTC)
	postSyslog(t, src.s, rackA, mac, at, "booting", "eth0 up", "ready")
	onSource := machineSyslog(t, src.s, id)

	if _, err := src.s.Quiesce(ctx, alice, id, migration); err != nil {
		t.Fatal(err)
	}
	bundle, err := src.s.Export(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dst.s.Import(ctx, moveTicket("t1", migration), bundle, drp2); err != nil {
		t.Fatal(err)
	}
	sameLines(t, "target after the import", machineSyslog(t, dst.s, id), onSource)
	// The copy is imported again with the same ticket (the answer was lost): nothing twice.
	if _, err := dst.s.Import(ctx, moveTicket("t1", migration), bundle, drp2); err != nil {
		t.Fatal(err)
	}
	sameLines(t, "target after the import retried", machineSyslog(t, dst.s, id), onSource)

	// The undo deletes the copy and the lines it brought.
	if err := dst.s.Delete(store.ForMigration(ctx, migration), alice, api.KindMachines, id, false); err != nil {
		t.Fatal(err)
	}
	if n := count(t, dst.s, "syslog"); n != 0 {
		t.Fatalf("%d syslog messages on the target after the copy was deleted", n)
	}
	sameLines(t, "source after the undo", machineSyslog(t, src.s, id), onSource)

	// The move again, to its end; the target's rack then appends after the moved lines.
	if _, err := dst.s.Import(ctx, moveTicket("t2", migration), bundle, drp2); err != nil {
		t.Fatal(err)
	}
	if _, err := src.s.FinalizeMigration(ctx, alice, id, drp2); err != nil {
		t.Fatal(err)
	}
	if _, err := dst.s.Activate(ctx, alice, id); err != nil {
		t.Fatal(err)
	}
	postSyslog(t, dst.s, rackB, mac, at.Add(time.Hour), "after the move")
	onTarget := machineSyslog(t, dst.s, id)
	sameLines(t, "target after the move", onTarget, append(onSource[:3:3], at.Add(time.Hour).Format(time.RFC3339Nano)+" "+rackB+" 10.0.0.7 after the move"))

	// Back to the source, over its stub: its own three lines are there once, the new one follows.
	back := "migrate-machine/back"
	if _, err := dst.s.Quiesce(ctx, alice, id, back); err != nil {
		t.Fatal(err)
	}
	home, err := dst.s.Export(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.s.Import(ctx, moveTicket("t3", back), home, "https://drp1:8092"); err != nil {
		t.Fatal(err)
	}
	sameLines(t, "source after the machine came back", machineSyslog(t, src.s, id), onTarget)
	// Undone by redirecting the copy: the line it added goes, the source's own stay.
	if _, err := src.s.RedirectCopy(store.ForMigration(ctx, back), alice, id, drp2); err != nil {
		t.Fatal(err)
	}
	sameLines(t, "source after the return was undone", machineSyslog(t, src.s, id), onSource)
}

// TestMovedSyslogIsBounded: an export carries the newest messages within the count and byte
// bounds, oldest first, escaping what was stored raw; an import carrying more than the
// bounds, an over-long or raw field, or messages that are not the machine's is refused whole
// and changes nothing.
func TestMovedSyslogIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, birdy := syslogSource(t)
	id := birdy.Uuid
	// Rows as a region stored them, one of them before its control characters were escaped.
	if _, err := src.s.DB().Exec(ctx, `INSERT INTO syslog (machine, received, doc)
		SELECT $1, now(), jsonb_build_object('Addr', '10.0.0.7', 'MAC', $2::text, 'Received', now(), 'Facility', 1, 'Severity', 6,
			'Text', CASE WHEN n = 1 THEN E'raw \x1b[31m' ELSE 'line ' || n END)
		FROM generate_series(1, $3::int) n ORDER BY n`, id, birdy.HardwareAddrs[0], api.MaxMovedSyslog+5); err != nil {
		t.Fatal(err)
	}
	b, err := src.s.Export(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Syslog) != api.MaxMovedSyslog || b.Syslog[0].Text != "line 6" || b.Syslog[len(b.Syslog)-1].Text != fmt.Sprintf("line %d", api.MaxMovedSyslog+5) {
		t.Fatalf("export of %d messages: %d; want the newest %d, oldest first (line 6 to line %d)",
			api.MaxMovedSyslog+5, len(b.Syslog), api.MaxMovedSyslog, api.MaxMovedSyslog+5)
	}
	if _, err := src.s.DB().Exec(ctx, `UPDATE syslog SET doc = jsonb_set(doc, '{Text}', to_jsonb(repeat('x', $1)))
		WHERE id IN (SELECT id FROM syslog ORDER BY id DESC LIMIT 200)`, syslogmsg.MaxText); err != nil {
		t.Fatal(err)
	}
	if b, err = src.s.Export(ctx, id); err != nil {
		t.Fatal(err)
	}
	if want := api.MaxMovedSyslogBytes / syslogmsg.MaxText; len(b.Syslog) != want {
		t.Fatalf("export of 200 messages of %d bytes: %d messages, want the newest %d (%d bytes at most)", syslogmsg.MaxText, len(b.Syslog), want, api.MaxMovedSyslogBytes)
	}
	if _, err := src.s.DB().Exec(ctx, `DELETE FROM syslog WHERE id NOT IN (SELECT min(id) FROM syslog UNION SELECT max(id) FROM syslog)`); err != nil {
		t.Fatal(err)
	}
	// A raw Hostname that escaped is longer than an import accepts stays behind.
	if _, err := src.s.DB().Exec(ctx, `INSERT INTO syslog (machine, received, doc)
		VALUES ($1, now(), jsonb_build_object('Addr', '10.0.0.7', 'MAC', $2::text, 'Received', now(), 'Facility', 1, 'Severity', 6,
			'Hostname', repeat(E'\x1b', 100), 'Text', 'too long escaped'))`, id, birdy.HardwareAddrs[0]); err != nil {
		t.Fatal(err)
	}
	good, err := src.s.Export(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(good.Syslog) != 2 || good.Syslog[0].Text != `raw \x1b[31m` || good.Syslog[1].Text != strings.Repeat("x", syslogmsg.MaxText) {
		t.Fatalf("export of a raw row, a long row and a row too long escaped: %d messages, the first %q; want the first escaped, the last left behind",
			len(good.Syslog), good.Syslog[0].Text)
	}

	dst := seedDestination(t)
	with := func(change func(b *api.Bundle)) api.Bundle {
		c := good
		c.Syslog = append([]api.MovedSyslogMessage(nil), good.Syslog...)
		change(&c)
		return c
	}
	many := func(n int, text string) func(b *api.Bundle) {
		return func(b *api.Bundle) {
			b.Syslog = make([]api.MovedSyslogMessage, n)
			for i := range b.Syslog {
				b.Syslog[i] = good.Syslog[1]
				b.Syslog[i].Origin = fmt.Sprintf("0d000000-0000-4000-8000-%012d", i)
				b.Syslog[i].Text = text
			}
		}
	}
	cases := []struct {
		name   string
		bundle api.Bundle
		want   string
	}{
		{"too many messages", with(many(api.MaxMovedSyslog+1, "x")), fmt.Sprintf("carries %d syslog messages; at most %d", api.MaxMovedSyslog+1, api.MaxMovedSyslog)},
		{"too many bytes", with(many(api.MaxMovedSyslogBytes/syslogmsg.MaxText+1, strings.Repeat("x", syslogmsg.MaxText))),
			fmt.Sprintf("syslog holds more than %d bytes (at message %d)", api.MaxMovedSyslogBytes, api.MaxMovedSyslogBytes/syslogmsg.MaxText)},
		{"line too long", with(func(b *api.Bundle) { b.Syslog[1].Text = strings.Repeat("x", syslogmsg.MaxText+1) }),
			fmt.Sprintf("syslog message 1: syslog message: Text of %d bytes is longer than %d", syslogmsg.MaxText+1, syslogmsg.MaxText)},
		{"raw control character", with(func(b *api.Bundle) { b.Syslog[1].Text = "raw \x1b[31m" }), "syslog message 1: syslog message: Text:"},
		{"raw bidi control", with(func(b *api.Bundle) { b.Syslog[0].Hostname = "evil\u202e" }), "syslog message 0: syslog message: Hostname:"},
		{"no origin", with(func(b *api.Bundle) { b.Syslog[0].Origin = "" }), "syslog message 0"},
		{"origin twice", with(func(b *api.Bundle) { b.Syslog[1].Origin = b.Syslog[0].Origin }), "is message 0's too"},
		{"another machine's", with(func(b *api.Bundle) { b.Syslog[1].Machine = mach1 }), "belongs to machine " + mach1},
		{"no receipt time", with(func(b *api.Bundle) { b.Syslog[0].Received = time.Time{} }), "Received is missing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := snapshot(t, dst.s) + jsonOf(t, []int{count(t, dst.s, "tickets"), count(t, dst.s, "syslog")})
			_, err := dst.s.Import(ctx, ticketUse("t-"+c.name), c.bundle, drp2)
			wantErr(t, err, store.ErrInvalid, c.want)
			if after := snapshot(t, dst.s) + jsonOf(t, []int{count(t, dst.s, "tickets"), count(t, dst.s, "syslog")}); after != before {
				t.Fatal("a refused import changed the database")
			}
		})
	}
	if _, err := dst.s.Import(ctx, ticketUse("t-good"), good, drp2); err != nil {
		t.Fatal(err)
	}
	if n := count(t, dst.s, "syslog"); n != 2 {
		t.Fatalf("%d messages stored by the good import, want 2", n)
	}
}
