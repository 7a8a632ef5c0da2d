package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/region/api"
	regionclient "github.com/ironflow/ironflow/region/client"
)

// abuseBodies checks what a request body may name: a principal, another rack's or machine's
// object, a secret field for a role that may not hold it.
func abuseBodies(t *testing.T, s *abuseStack) {
	t.Run("a token request only narrows its user's role", func(t *testing.T) {
		a := s.call(t, admin, "POST", "/api/v1/users/reader/token", mustJSON(t, api.TokenRequest{Role: api.RoleAdmin}))
		if a.code < 400 || a.code >= 500 {
			t.Fatalf("a readonly user's token as admin: %d %s", a.code, a.body)
		}
	})
	t.Run("secret fields are blank for roles that may not read them", func(t *testing.T) {
		path := "/api/v1/machines/" + s.machineA.Uuid
		for _, p := range []principal{readonly, ownRack, machineToken} {
			var m api.Machine
			decodeAnswer(t, s.call(t, p, "GET", path, nil), &m)
			if m.Secret != "" {
				t.Errorf("%s reads machine A's agent secret", p)
			}
		}
		var m api.Machine
		decodeAnswer(t, s.call(t, operator, "GET", path, nil), &m)
		if m.Secret != s.machineA.Secret {
			t.Errorf("an operator reads secret %q, want the machine's", m.Secret)
		}
	})
	t.Run("an image upload whose bytes do not hash to its SHA-256 stores nothing", func(t *testing.T) {
		data := []byte("not the claimed image")
		_, err := s.admin.UploadImage(context.Background(), regionclient.ImageUpload{Name: "claimed", SHA256: strings.Repeat("ab", 32)}, bytes.NewReader(data), int64(len(data)))
		var apiErr *regionclient.APIError
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnprocessableEntity {
			t.Fatalf("mismatching upload: %v, want 422", err)
		}
		if a := s.call(t, readonly, "GET", "/api/v1/images/claimed", nil); a.code != http.StatusNotFound {
			t.Errorf("the refused image is shown: %d %s", a.code, a.body)
		}
	})
	t.Run("a rack token registers only its own rack", func(t *testing.T) {
		a := callAs(t, s.rackB.Token, "POST", s.url+"/api/v1/racks/register", mustJSON(t, api.RackRegistration{Uuid: s.rackA.Uuid, Name: "rack-a"}))
		if a.code != 403 {
			t.Fatalf("rack B re-registering rack A: %d %s", a.code, a.body)
		}
	})
	t.Run("a rack's leases stay in its own subnets", func(t *testing.T) {
		lease := api.Lease{Addr: abuseAddr(abuseRackBNet, 120).String(), MAC: "52:54:00:bb:00:09", State: "active",
			Start: time.Now(), Expires: time.Now().Add(time.Hour)}
		var res api.LeaseSyncResult
		decodeAnswer(t, s.call(t, ownRack, "POST", "/api/v1/racks/"+s.rackA.Uuid+"/leases", mustJSON(t, []api.Lease{lease})), &res)
		if res.Stored != 0 || len(res.Rejected) != 1 {
			t.Errorf("rack A's lease in rack B's subnet: %+v", res)
		}
	})
	t.Run("a migration step's attempt is a write's, and a malformed one is 400", func(t *testing.T) {
		item := "/api/v1/machines/" + abuseMissing
		steps := []struct{ method, path, body string }{
			{"POST", item + "/quiesce", "{}"}, {"POST", item + "/unquiesce", ""}, {"POST", item + "/finalize-migration", "{}"},
			{"POST", item + "/restore-migration", ""}, {"POST", item + "/activate", ""}, {"POST", item + "/redirect-copy", "{}"},
			{"DELETE", item, ""},
		}
		valid := url.QueryEscape(api.Attempt{Started: time.Now(), Number: 1}.String())
		garbage := []string{"x", "0@2026-03-01T12:00:00Z", "1@yesterday", "1@1970-01-01T00:00:00Z", valid + "&" + api.ParamAttempt + "=" + valid}
		for _, st := range steps {
			var body []byte
			if st.body != "" {
				body = []byte(st.body)
			}
			query := "?migration=migrate-machine/x&" + api.ParamAttempt + "="
			for _, p := range []principal{readonly, ownRack} {
				if a := s.call(t, p, st.method, st.path+query+valid, body); a.code != 403 {
					t.Errorf("%s %s with an attempt as %s: %d %s, want 403", st.method, st.path, p, a.code, a.body)
				}
			}
			for _, g := range garbage {
				if a := s.call(t, admin, st.method, st.path+query+g, body); a.code != 400 {
					t.Errorf("%s %s with attempt %q: %d %s, want 400", st.method, st.path, g, a.code, a.body)
				}
			}
		}
		ticket, err := s.admin.MintTicket(context.Background(), api.TicketRequest{})
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest("POST", s.url+"/api/v1/machines/import?"+api.ParamAttempt+"=x", bytes.NewReader(mustJSON(t, api.ImportRequest{Migration: "migrate-machine/x"})))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(api.TicketHeader, ticket.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Fatalf("import with a malformed attempt: %d, want 400", resp.StatusCode)
		}
	})
	t.Run("a forged migrate ticket imports nothing", func(t *testing.T) {
		req, err := http.NewRequest("POST", s.url+"/api/v1/machines/import", bytes.NewReader(mustJSON(t, api.ImportRequest{Migration: "migrate-machine/x"})))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(api.TicketHeader, "forged")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Fatalf("import with a forged ticket: %d", resp.StatusCode)
		}
	})
	t.Run("an agent writes only its own machine's jobs", func(t *testing.T) {
		job, err := s.admin.Jobs().Create(context.Background(), api.Job{Machine: s.machineB.Uuid, StartTime: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		a := s.call(t, ownAgent, "PUT", "/api/v1/agent/"+s.machineA.Uuid+"/jobs/"+job.Uuid+"/log", []byte("forged\n"))
		if a.code != 403 && a.code != 404 {
			t.Fatalf("machine A's agent writing machine B's job log: %d %s", a.code, a.body)
		}
		if log, err := s.admin.JobLog(context.Background(), job.Uuid); err != nil || log != "" {
			t.Fatalf("machine B's job log = %q, %v", log, err)
		}
	})
	t.Run("queued operation does not run as the principal its payload names", func(t *testing.T) {
		abuseQueuedPrincipal(t, s)
	})
	t.Run("rack declares only compose fields of its own pod's VM", func(t *testing.T) {
		abusePodVMFields(t, s)
	})
	t.Run("rack syslog for another rack's machine is not stored", func(t *testing.T) {
		abuseForeignSyslog(t, s)
	})
	t.Run("an import's syslog is bounded and files nothing under another machine", func(t *testing.T) {
		abuseImportedSyslog(t, s)
	})
	t.Run("enlistment does not change a declared machine's MACs or reservation", func(t *testing.T) {
		abuseEnlistTakeover(t, s)
	})
}

// abuseQueuedPrincipal: an operator queues, for a paused rack, a write whose payload names
// the admin as its caller; when the pause ends the write must not run as the admin (it would
// create an admin user the operator may not create).
func abuseQueuedPrincipal(t *testing.T, s *abuseStack) {
	rackPath := "/api/v1/racks/" + s.rackB.Uuid
	if a := s.call(t, operator, "POST", rackPath+"/pause", nil); a.code != 200 {
		t.Fatalf("pause rack B: %d %s", a.code, a.body)
	}
	defer s.call(t, admin, "POST", rackPath+"/unpause", nil)
	// A write request with the principal fields an older payload carried.
	payload := map[string]any{"Method": "POST", "Path": "/api/v1/users", "Body": `{"Name":"mallory","Role":"admin"}`,
		"User": "admin", "Role": api.RoleAdmin}
	op := api.PendingOperation{Target: s.rackB.Uuid, Kind: api.OperationWrite, Payload: payload}
	queued := s.call(t, operator, "POST", rackPath+"/operations", mustJSON(t, op))
	if a := s.call(t, operator, "POST", rackPath+"/unpause", nil); a.code != 200 {
		t.Fatalf("unpause rack B: %d %s", a.code, a.body)
	}
	if a := s.call(t, admin, "GET", "/api/v1/users/mallory", nil); a.code != 404 {
		t.Fatalf("the operator's queued write (queued: %d %s) ran as the admin: user mallory is %d %s", queued.code, queued.body, a.code, a.body)
	}
}

// abusePodVMFields: rack A declares a VM of its pod with fields a compose does not set (the
// agent secret, a reservation, metadata), and a VM of rack B's pod.
func abusePodVMFields(t *testing.T, s *abuseStack) {
	ctx := context.Background()
	podA, err := s.admin.Pods().Create(ctx, api.Pod{Name: "pod-a", Type: "virsh", PowerAddress: "qemu:///system", Rack: s.rackA.Uuid})
	if err != nil {
		t.Fatal(err)
	}
	podB, err := s.admin.Pods().Create(ctx, api.Pod{Name: "pod-b", Type: "virsh", PowerAddress: "qemu:///system", Rack: s.rackB.Uuid})
	if err != nil {
		t.Fatal(err)
	}
	vmPath := func(pod string) string { return "/api/v1/racks/" + s.rackA.Uuid + "/pods/" + pod + "/vms" }

	foreign := api.Machine{Uuid: newUUID(), Name: "vm-of-b", HardwareAddrs: []string{"52:54:00:ab:00:02"}}
	if a := s.call(t, ownRack, "POST", vmPath(podB.Uuid), mustJSON(t, foreign)); a.code < 400 || a.code >= 500 {
		t.Errorf("rack A declaring a VM of rack B's pod: %d %s", a.code, a.body)
	}
	if a := s.call(t, admin, "GET", "/api/v1/machines/"+foreign.Uuid, nil); a.code != 404 {
		t.Errorf("rack A's declaration in rack B's pod made machine %s: %d", foreign.Uuid, a.code)
	}

	vm := api.Machine{Uuid: newUUID(), Name: "vm-a", HardwareAddrs: []string{"52:54:00:ab:00:01"},
		Secret: "chosen-by-the-rack", Address: "10.200.0.9", Meta: map[string]string{"injected": "by-the-rack"}}
	declared := s.call(t, ownRack, "POST", vmPath(podA.Uuid), mustJSON(t, vm))
	var stored api.Machine
	if a := s.call(t, admin, "GET", "/api/v1/machines/"+vm.Uuid, nil); a.code == 200 {
		decodeAnswer(t, a, &stored)
	}
	if stored.Secret == vm.Secret || stored.Address == vm.Address || stored.Meta["injected"] != "" {
		t.Errorf("rack A's declaration (%d %s) stored fields a compose does not set: Secret %q, Address %q, Meta %v",
			declared.code, declared.body, stored.Secret, stored.Address, stored.Meta)
	}
}

// abuseForeignSyslog: rack B posts a message from machine A's MAC (machine A is behind rack
// A), from an address of rack B's own subnet; the region must not file it under machine A. Rack A's own post is filed, so the check
// is not vacuous.
func abuseForeignSyslog(t *testing.T, s *abuseStack) {
	msg := func(from netip.Addr, text string) []byte {
		return mustJSON(t, []api.SyslogMessage{{Addr: from.String(), MAC: s.machineA.HardwareAddrs[0], Received: time.Now(), Severity: 6, Text: text}})
	}
	logsOfA := func() []string {
		ms, err := s.admin.MachineLogs(context.Background(), s.machineA.Uuid, url.Values{})
		if err != nil {
			t.Fatal(err)
		}
		var texts []string
		for _, m := range ms {
			texts = append(texts, m.Text)
		}
		return texts
	}
	if a := s.call(t, ownRack, "POST", "/api/v1/racks/"+s.rackA.Uuid+"/syslog", msg(abuseAddr(abuseServedNet(), 50), "from rack a")); a.code != 200 {
		t.Fatalf("rack A's syslog: %d %s", a.code, a.body)
	}
	posted := s.call(t, otherRack, "POST", "/api/v1/racks/"+s.rackB.Uuid+"/syslog", msg(abuseAddr(abuseRackBNet, 50), "forged by rack b"))
	if texts := logsOfA(); slices.Contains(texts, "forged by rack b") || !slices.Contains(texts, "from rack a") {
		t.Errorf("machine A's syslog after rack B posted for it (%d %s): %q", posted.code, posted.body, texts)
	}
}

// abuseImportedSyslog: the holder of a migrate ticket imports a machine whose syslog names
// machine A, and one with more messages than move with a machine: both are refused whole (the
// ticket is not even spent) and machine A's log is unchanged; the same machine with its own
// bounded syslog is imported with it, so the refusals are not vacuous.
func abuseImportedSyslog(t *testing.T, s *abuseStack) {
	ctx := context.Background()
	ticket, err := s.admin.MintTicket(ctx, api.TicketRequest{})
	if err != nil {
		t.Fatal(err)
	}
	logsOf := func(machine string) []api.SyslogMessage {
		ms, err := s.admin.MachineLogs(ctx, machine, url.Values{})
		if err != nil {
			t.Fatal(err)
		}
		return ms
	}
	before := mustJSON(t, logsOf(s.machineA.Uuid))
	imported := api.Machine{Uuid: newUUID(), Name: "imported-with-syslog", HardwareAddrs: []string{"52:54:00:5e:10:01"}}
	line := func(origin, machine, text string) api.MovedSyslogMessage {
		return api.MovedSyslogMessage{Origin: origin, Stored: time.Now(), SyslogMessage: api.SyslogMessage{Machine: machine, Addr: "10.200.0.5",
			MAC: imported.HardwareAddrs[0], Received: time.Now(), Severity: 6, Text: text}}
	}
	flood := make([]api.MovedSyslogMessage, api.MaxMovedSyslog+1)
	for i := range flood {
		flood[i] = line(newUUID(), "", "flood")
	}
	migration := "migrate-machine/" + imported.Uuid
	for _, c := range []struct {
		name   string
		syslog []api.MovedSyslogMessage
	}{
		{"a line of machine A", []api.MovedSyslogMessage{line(newUUID(), s.machineA.Uuid, "planted under machine a")}},
		{"too many lines", flood},
	} {
		_, err := s.admin.Import(ctx, api.ImportRequest{Ticket: ticket.Token, Migration: migration, Bundle: api.Bundle{Machine: imported, Syslog: c.syslog}})
		var apiErr *regionclient.APIError
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("import with %s: %v, want 422", c.name, err)
		}
		if _, err := s.admin.Machines().Get(ctx, imported.Uuid); err == nil {
			t.Errorf("the import with %s created its machine", c.name)
		}
	}
	if after := mustJSON(t, logsOf(s.machineA.Uuid)); !bytes.Equal(after, before) {
		t.Errorf("machine A's syslog changed by refused imports:\n%s\nwas\n%s", after, before)
	}
	if _, err := s.admin.Import(ctx, api.ImportRequest{Ticket: ticket.Token, Migration: migration,
		Bundle: api.Bundle{Machine: imported, Syslog: []api.MovedSyslogMessage{line(newUUID(), "", "its own line")}}}); err != nil {
		t.Fatalf("import with its own syslog: %v", err)
	}
	if got := logsOf(imported.Uuid); len(got) != 1 || got[0].Text != "its own line" {
		t.Errorf("syslog of the imported machine: %+v", got)
	}
	if err := s.admin.DeleteForMigration(ctx, imported.Uuid, migration); err != nil {
		t.Fatal(err)
	}
}

// abuseEnlistTakeover: a machine on the provisioning network enlists (through a rack, whose
// token the region sees) naming a declared machine's MAC next to its own; the declared
// machine keeps its MACs and reservation, so the newcomer does not get its address.
func abuseEnlistTakeover(t *testing.T, s *abuseStack) {
	ctx := context.Background()
	declared, err := s.admin.Machines().Create(ctx, api.Machine{Name: "declared", HardwareAddrs: []string{"52:54:00:de:c1:01"}, Address: "10.200.0.77", Rack: s.rackA.Uuid})
	if err != nil {
		t.Fatal(err)
	}
	report := api.Enlistment{Inventory: &api.Inventory{Hostname: "intruder", Arch: "amd64", Interfaces: []api.NetInterface{
		{Name: "eth0", MAC: declared.HardwareAddrs[0]}, {Name: "eth1", MAC: "52:54:00:ba:d0:01"}}}}
	enlisted := s.call(t, ownRack, "POST", "/api/v1/enlist", mustJSON(t, report))
	after := getMachine(ctx, t, s.admin, declared.Uuid)
	if !slices.Equal(after.HardwareAddrs, declared.HardwareAddrs) || after.Address != declared.Address {
		t.Errorf("an unauthenticated enlistment (%d %s) changed the declared machine: MACs %v, address %q (were %v, %q)",
			enlisted.code, enlisted.body, after.HardwareAddrs, after.Address, declared.HardwareAddrs, declared.Address)
	}
}

// decodeAnswer decodes a 200 answer's JSON body into v.
func decodeAnswer(t *testing.T, a abuseAnswer, v any) {
	t.Helper()
	if a.code != 200 {
		t.Fatalf("answer %d %s", a.code, a.body)
	}
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("answer %s: %v", a.body, err)
	}
}
