package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/server"
	"github.com/ironflow/ironflow/region/store"
)

// syslogFixture is a rack serving one subnet with a machine reserved on it, and a second rack.
type syslogFixture struct {
	e           *env
	rack, other api.RackRegistered
	machine     string // UUID of birdy, MAC 52:54:00:00:05:01, Address 10.5.0.100
	subnet      string // UUID of 10.5.0.0/24
	path        string // the rack's syslog route
	now         time.Time
}

func newSyslogFixture(t *testing.T) syslogFixture {
	e := newEnv(t)
	f := syslogFixture{e: e, rack: e.register(api.RackRegistration{Name: "rack-a"}), other: e.register(api.RackRegistration{Name: "rack-b"}), now: time.Now().UTC()}
	fabric := e.create(api.KindFabrics, map[string]any{"Name": "f"})["Uuid"]
	vlan := e.create(api.KindVLANs, map[string]any{"Fabric": fabric, "VID": 1, "PrimaryRack": f.rack.Rack.Uuid, "DHCPOn": true})["Uuid"]
	f.subnet = e.create(api.KindSubnets, map[string]any{"Name": "s1", "CIDR": "10.5.0.0/24", "VLAN": vlan})["Uuid"].(string)
	f.machine = e.create(api.KindMachines, map[string]any{"Name": "birdy", "HardwareAddrs": []string{"52:54:00:00:05:01"}, "Address": "10.5.0.100"})["Uuid"].(string)
	f.path = e.base + "/api/v1/racks/" + f.rack.Rack.Uuid + "/syslog"
	return f
}

func (f syslogFixture) msg(addr, mac, text string) api.SyslogMessage {
	return api.SyslogMessage{Addr: addr, MAC: mac, Received: f.now, Facility: 1, Severity: 6, App: "test", Text: text}
}

// lease writes, as an operator, a live lease of rack on the fixture's subnet.
func (f syslogFixture) lease(addr, mac string, rack api.RackRegistered) {
	f.e.create(api.KindLeases, map[string]any{"Addr": addr, "MAC": mac, "Subnet": f.subnet, "Rack": rack.Rack.Uuid,
		"State": "active", "Start": f.now, "Expires": f.now.Add(time.Hour)})
}

func (f syslogFixture) logs(t *testing.T, query string) ([]api.SyslogMessage, response) {
	t.Helper()
	r := f.e.mustDo(api.RoleReadonly, http.MethodGet, "/api/v1/machines/Name:birdy/logs"+query, nil, http.StatusOK)
	var out []api.SyslogMessage
	decodeJSON(t, r, &out)
	return out, r
}

// TestRackSyslog: a rack's batch is stored under the machine that has each message's MAC;
// messages of addresses the rack does not serve, of addresses another rack holds, of MACs of
// no machine, or with control characters are refused one by one and counted; only the rack
// itself may post, and a bad batch changes nothing.
func TestRackSyslog(t *testing.T) {
	t.Parallel()
	f := newSyslogFixture(t)
	e := f.e
	// rack-b holds a live lease on 10.5.0.9 (an operator wrote it; racks write their own).
	f.lease("10.5.0.9", "52:54:00:00:05:09", f.other)

	batch := []api.SyslogMessage{
		f.msg("10.5.0.100", "52:54:00:00:05:01", "first"),
		f.msg("10.6.0.1", "52:54:00:00:05:01", "not served"),
		f.msg("10.5.0.9", "52:54:00:00:05:01", "another rack's address"),
		f.msg("10.5.0.101", "52:54:00:00:05:02", "no machine"),
		f.msg("10.5.0.100", "52:54:00:00:05:01", "raw \x1b[31m escape"),
		f.msg("10.5.0.100", "52:54:00:00:05:01", "second"),
	}
	r := doRequest(t, f.rack.Token, http.MethodPost, f.path, batch)
	var res api.SyslogSyncResult
	decodeJSON(t, r, &res)
	wantReasons := map[int]string{1: store.SyslogNotServed, 2: store.SyslogOtherRack, 3: store.SyslogNoMachine, 4: store.SyslogInvalid}
	if r.code != http.StatusOK || res.Stored != 2 || len(res.Rejected) != len(wantReasons) {
		t.Fatalf("sync: %d %s, want 2 stored and 4 refused", r.code, r.body)
	}
	for _, rej := range res.Rejected {
		if wantReasons[rej.Index] != rej.Reason {
			t.Errorf("message %d refused as %q (%s), want %q", rej.Index, rej.Reason, rej.Error, wantReasons[rej.Index])
		}
	}
	logs, _ := f.logs(t, "")
	if len(logs) != 2 || logs[0].Text != "first" || logs[1].Text != "second" || logs[0].Machine != f.machine || logs[0].Rack != f.rack.Rack.Uuid || logs[0].ID >= logs[1].ID {
		t.Fatalf("stored logs %+v", logs)
	}
	if n := len(e.mustDo(api.RoleAdmin, http.MethodGet, "/api/v1/events?Kind=syslog&Key="+f.rack.Rack.Uuid, nil, http.StatusOK).list(t)); n != 1 {
		t.Fatalf("%d audit events for one batch, want 1", n)
	}
	metrics := string(e.mustDo("", http.MethodGet, "/metrics", nil, http.StatusOK).body)
	for reason := range map[string]bool{store.SyslogNotServed: true, store.SyslogOtherRack: true, store.SyslogNoMachine: true, store.SyslogInvalid: true} {
		if want := fmt.Sprintf("ironflow_syslog_records_rejected_total{reason=%q} 1", reason); !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	// Only the rack itself posts: not another rack, not an admin, operator or readonly token,
	// not anonymously. Bad batches are refused whole. None of it stores anything.
	one := []api.SyslogMessage{f.msg("10.5.0.100", "52:54:00:00:05:01", "refused")}
	tooMany := make([]api.SyslogMessage, api.MaxSyslogBatch+1)
	for i := range tooMany {
		tooMany[i] = one[0]
	}
	for _, c := range []struct {
		name, token string
		body        any
		code        int
	}{
		{"other rack", f.other.Token, one, http.StatusForbidden},
		{"admin", e.tokens[api.RoleAdmin], one, http.StatusForbidden},
		{"operator", e.tokens[api.RoleOperator], one, http.StatusForbidden},
		{"readonly", e.tokens[api.RoleReadonly], one, http.StatusForbidden},
		{"no token", "", one, http.StatusUnauthorized},
		{"not a list", f.rack.Token, `{"Addr":"10.5.0.100"}`, http.StatusBadRequest},
		{"unknown field", f.rack.Token, `[{"Bogus":1}]`, http.StatusBadRequest},
		{"too many", f.rack.Token, tooMany, http.StatusRequestEntityTooLarge},
	} {
		t.Run(c.name, func(t *testing.T) {
			doRequest(t, c.token, http.MethodPost, f.path, c.body).apiError(t, c.code)
		})
	}
	if logs, _ := f.logs(t, ""); len(logs) != 2 {
		t.Fatalf("%d logs after refused posts, want 2", len(logs))
	}
	// A machine token reads nothing, not even its own machine's syslog.
	doRequest(t, e.machineToken(f.machine), http.MethodGet, e.base+"/api/v1/machines/Name:birdy/logs", nil).apiError(t, http.StatusForbidden)
}

// TestMachineLogsEscapeFormatCharacters: a rack's message holding a raw bidi control or
// zero-width character is refused like one holding a control character, and a message stored
// with them before is served with them escaped, in every field, so that no line shows
// differently from what it holds.
func TestMachineLogsEscapeFormatCharacters(t *testing.T) {
	t.Parallel()
	f := newSyslogFixture(t)
	raw := f.msg("10.5.0.100", "52:54:00:00:05:01", "invoice\u202efdp.exe\u202c\u200b")
	var res api.SyslogSyncResult
	decodeJSON(t, doRequest(t, f.rack.Token, http.MethodPost, f.path, []api.SyslogMessage{raw}), &res)
	if res.Stored != 0 || len(res.Rejected) != 1 || res.Rejected[0].Reason != store.SyslogInvalid {
		t.Fatalf("a raw format character: %+v, want the message refused as invalid", res)
	}

	db, err := pgx.Connect(context.Background(), f.e.db)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	raw.Machine, raw.Rack, raw.Hostname, raw.ProcID, raw.MsgID = f.machine, f.rack.Rack.Uuid, "birdy\u2066", "1\u2028", "m\ufeff"
	doc, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(context.Background(), "INSERT INTO syslog (machine, received, doc) VALUES ($1, $2, $3)", f.machine, f.now, doc); err != nil {
		t.Fatal(err)
	}
	logs, _ := f.logs(t, "")
	if len(logs) != 1 {
		t.Fatalf("%d logs, want the one stored raw", len(logs))
	}
	if m := logs[0]; m.Text != `invoice\u202efdp.exe\u202c\u200b` || m.Hostname != `birdy\u2066` || m.ProcID != `1\u2028` || m.MsgID != `m\ufeff` || m.App != "test" {
		t.Fatalf("served text %q host %q procid %q msgid %q app %q, want format characters escaped", m.Text, m.Hostname, m.ProcID, m.MsgID, m.App)
	}
}

// TestRackSyslogOnlyOfServedMachines: a rack posts syslog only for the machines it serves
// (behind it, reserved in its subnets, leased by it, or held by no rack at all); a message
// naming another rack's machine by MAC is refused and counted, and stores nothing under that
// machine.
func TestRackSyslogOnlyOfServedMachines(t *testing.T) {
	t.Parallel()
	f := newSyslogFixture(t)
	e := f.e
	fabric := e.create(api.KindFabrics, map[string]any{"Name": "f2"})["Uuid"]
	vlan := e.create(api.KindVLANs, map[string]any{"Fabric": fabric, "VID": 2, "PrimaryRack": f.other.Rack.Uuid, "DHCPOn": true})["Uuid"]
	s2 := e.create(api.KindSubnets, map[string]any{"Name": "s2", "CIDR": "10.6.0.0/24", "VLAN": vlan})["Uuid"]
	robin := e.create(api.KindMachines, map[string]any{"Name": "robin", "HardwareAddrs": []string{"52:54:00:00:06:01"}, "Address": "10.6.0.10"})["Uuid"].(string)
	wren := e.create(api.KindMachines, map[string]any{"Name": "wren", "HardwareAddrs": []string{"52:54:00:00:06:02"}, "Rack": f.rack.Rack.Uuid})["Uuid"].(string)
	lark := e.create(api.KindMachines, map[string]any{"Name": "lark", "HardwareAddrs": []string{"52:54:00:00:06:03"}})["Uuid"].(string)
	f.lease("10.5.0.30", "52:54:00:00:06:03", f.rack)
	// Held by no rack yet: its first lease has not reached the region when its syslog does.
	finch := e.create(api.KindMachines, map[string]any{"Name": "finch", "HardwareAddrs": []string{"52:54:00:00:06:04"}})["Uuid"].(string)
	jay := e.create(api.KindMachines, map[string]any{"Name": "jay", "HardwareAddrs": []string{"52:54:00:00:06:05"}})["Uuid"].(string)
	e.create(api.KindLeases, map[string]any{"Addr": "10.6.0.40", "MAC": "52:54:00:00:06:05", "Subnet": s2, "Rack": f.other.Rack.Uuid,
		"State": "active", "Start": f.now, "Expires": f.now.Add(time.Hour)})

	batch := []api.SyslogMessage{
		f.msg("10.5.0.100", "52:54:00:00:05:01", "reserved"),
		f.msg("10.5.0.20", "52:54:00:00:06:01", "rack-b's machine"),
		f.msg("10.5.0.21", "52:54:00:00:06:02", "behind the rack"),
		f.msg("10.5.0.30", "52:54:00:00:06:03", "leased"),
		f.msg("10.5.0.31", "52:54:00:00:06:04", "held by no rack"),
		f.msg("10.5.0.32", "52:54:00:00:06:05", "leased by rack-b"),
	}
	var res api.SyslogSyncResult
	r := doRequest(t, f.rack.Token, http.MethodPost, f.path, batch)
	decodeJSON(t, r, &res)
	if r.code != http.StatusOK || res.Stored != 4 || len(res.Rejected) != 2 ||
		res.Rejected[0].Index != 1 || res.Rejected[0].Reason != store.SyslogOtherMachine || !strings.Contains(res.Rejected[0].Error, "robin") ||
		res.Rejected[1].Index != 5 || res.Rejected[1].Reason != store.SyslogOtherMachine || !strings.Contains(res.Rejected[1].Error, "jay") {
		t.Fatalf("sync: %d %s, want 4 stored, robin's and jay's refused as %s", r.code, r.body, store.SyslogOtherMachine)
	}
	for machine, want := range map[string]int{robin: 0, wren: 1, lark: 1, finch: 1, jay: 0, f.machine: 1} {
		if logs, err := e.st.Syslog(context.Background(), store.SyslogQuery{Machine: machine}); err != nil || len(logs) != want {
			t.Errorf("machine %s has %d messages (%v), want %d", machine, len(logs), err, want)
		}
	}
	metrics := string(e.mustDo("", http.MethodGet, "/metrics", nil, http.StatusOK).body)
	if want := fmt.Sprintf("ironflow_syslog_records_rejected_total{reason=%q} 2", store.SyslogOtherMachine); !strings.Contains(metrics, want) {
		t.Errorf("metrics lack %s", want)
	}
}

// TestMachineLogsPagingAndFilters: logs come oldest first, paged with HeaderNext, and After
// and Since select the newer ones; bad filters are refused.
func TestMachineLogsPagingAndFilters(t *testing.T) {
	t.Parallel()
	f := newSyslogFixture(t)
	var batch []api.SyslogMessage
	for i := range 5 {
		m := f.msg("10.5.0.100", "52:54:00:00:05:01", fmt.Sprintf("m%d", i))
		m.Received = f.now.Add(time.Duration(i) * time.Minute)
		batch = append(batch, m)
	}
	doRequest(t, f.rack.Token, http.MethodPost, f.path, batch)

	page, r := f.logs(t, "?limit=2")
	if len(page) != 2 || page[0].Text != "m0" || r.header.Get(api.HeaderNext) != "2" {
		t.Fatalf("first page %+v next %q", page, r.header.Get(api.HeaderNext))
	}
	after, _ := f.logs(t, fmt.Sprintf("?After=%d", page[1].ID))
	if len(after) != 3 || after[0].Text != "m2" {
		t.Fatalf("after %d: %+v", page[1].ID, after)
	}
	since, _ := f.logs(t, "?Since="+url.QueryEscape(f.now.Add(3*time.Minute).Format(time.RFC3339Nano)))
	if len(since) != 2 || since[0].Text != "m3" {
		t.Fatalf("since: %+v", since)
	}
	for _, q := range []string{"?Since=yesterday", "?After=x", "?Machine=y", "?limit=0"} {
		f.e.do(api.RoleReadonly, http.MethodGet, "/api/v1/machines/Name:birdy/logs"+q, nil).apiError(t, http.StatusBadRequest)
	}
	f.e.do(api.RoleReadonly, http.MethodGet, "/api/v1/machines/Name:nobody/logs", nil).apiError(t, http.StatusNotFound)
}

// TestSyslogRetention: the region prunes machines' syslog to its retention.
func TestSyslogRetention(t *testing.T) {
	t.Parallel()
	f := newSyslogFixture(t)
	var batch []api.SyslogMessage
	for i := range 5 {
		batch = append(batch, f.msg("10.5.0.100", "52:54:00:00:05:01", fmt.Sprintf("m%d", i)))
	}
	doRequest(t, f.rack.Token, http.MethodPost, f.path, batch)
	startServer(t, f.e.st, "pruner", func(c *server.Config) {
		c.SyslogRetention = server.Retention{MaxCount: 2, Interval: 50 * time.Millisecond}
	})
	eventually(t, "syslog pruned to 2 messages", func() bool {
		logs, err := f.e.st.Syslog(context.Background(), store.SyslogQuery{Machine: f.machine})
		return err == nil && len(logs) == 2 && logs[0].Text == "m3"
	})
}
