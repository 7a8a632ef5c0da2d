package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/dev/seeddata"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/tickets"
)

const (
	seedFile     = "/work/shared/seeds/001_f6cb3cbade8ba0e8.txt"
	seedDrp2     = "https://drp2:8092" // the destination of the seed
	birdyJobsCmd = "drpcli jobs list Machine=" + seeddata.BirdyUUID
	migrationID  = "migrate-machine/" + seeddata.BirdyUUID
)

// seedAt returns the JSON the seed prints after the first shell line ending in cmd that
// follows marker, with the seed's destination URL replaced by dstURL.
func seedAt(t *testing.T, marker, cmd, dstURL string) []byte {
	t.Helper()
	b, err := os.ReadFile(seedFile)
	if err != nil {
		t.Fatalf("the migration seed is the reference of this test: %v", err)
	}
	seed := string(b)
	i := strings.Index(seed, marker)
	j := strings.Index(seed[max(i, 0):], cmd+"\n")
	if i < 0 || j < 0 {
		t.Fatalf("seed has no %q after %q", cmd, marker)
	}
	var raw json.RawMessage
	if err := json.NewDecoder(strings.NewReader(seed[i+j+len(cmd)+1:])).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	return []byte(strings.ReplaceAll(string(raw), seedDrp2, dstURL))
}

// sameObject checks that every field of want has the same JSON value in got, and that got
// has no other fields.
func sameObject(t *testing.T, what string, want, got []byte) {
	t.Helper()
	var w, g map[string]json.RawMessage
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %v: %s", what, err, got)
	}
	for field, wv := range w {
		var wc, gc bytes.Buffer
		_ = json.Compact(&wc, wv)
		if err := json.Compact(&gc, g[field]); err != nil {
			t.Errorf("%s.%s missing", what, field)
			continue
		}
		if wc.String() != gc.String() {
			t.Errorf("%s.%s = %s, seed has %s", what, field, gc.String(), wc.String())
		}
	}
	for field := range g {
		if _, ok := w[field]; !ok {
			t.Errorf("%s has field %s that the seed does not", what, field)
		}
	}
}

// sameList is sameObject for every element of two JSON arrays, in order.
func sameList(t *testing.T, what string, want, got []byte) {
	t.Helper()
	var w, g []json.RawMessage
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %v: %s", what, err, got)
	}
	if len(w) != len(g) {
		t.Fatalf("%s: %d elements, seed has %d", what, len(g), len(w))
	}
	for i := range w {
		sameObject(t, what+"["+string(rune('0'+i))+"]", w[i], g[i])
	}
}

// into decodes a 2xx answer.
func into[T any](t *testing.T, r response) T {
	t.Helper()
	var v T
	if r.code < 200 || r.code > 299 {
		t.Fatalf("status %d: %s", r.code, r.body)
	}
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("decode %T: %v: %s", v, err, r.body)
	}
	return v
}

// seedRegions are drp1 (src, holding birdy, its jobs and profiles) and drp2 (dst, with its
// own conflicting-profile), each a region server over HTTP on its own database.
func seedRegions(t *testing.T) (src, dst *env) {
	t.Helper()
	src, dst = newEnv(t), newEnv(t)
	for host, e := range map[string]*env{"drp1": src, "drp2": dst} {
		e.mustDo(api.RoleAdmin, http.MethodPost, "/api/v1/profiles",
			json.RawMessage(seedAt(t, "", "[admin@"+host+" ~]$ drpcli profiles show conflicting-profile", "")), http.StatusCreated)
	}
	src.create(api.KindProfiles, api.Profile{Name: "example-profile", Params: map[string]any{"example/param": "from-drp1"}})
	birdy, jobs, err := seeddata.Birdy()
	if err != nil {
		t.Fatal(err)
	}
	src.create(api.KindMachines, birdy)
	for _, j := range jobs {
		src.create(api.KindJobs, j)
	}
	return src, dst
}

// TestMigrationOverHTTP migrates the seed's birdy from one region server to another with the
// calls the MigrateMachine workflow makes, and compares both machines and both job lists with
// the seed's after-state (the destination's URL in place of https://drp2:8092).
func TestMigrationOverHTTP(t *testing.T) {
	t.Parallel()
	src, dst := seedRegions(t)
	id := seeddata.BirdyUUID
	op := api.RoleOperator

	ticket := into[api.Ticket](t, dst.mustDo(op, http.MethodPost, "/api/v1/migrate-tickets", nil, http.StatusCreated))
	if ticket.Endpoint != dst.base || ticket.Region != "test-region" || time.Until(ticket.Expires) < 59*time.Minute || time.Until(ticket.Expires) > time.Hour {
		t.Fatalf("ticket %+v", ticket)
	}
	src.mustDo(op, http.MethodPost, "/api/v1/machines/Name:birdy/quiesce", api.QuiesceRequest{Migration: migrationID}, http.StatusOK)
	bundle := into[api.Bundle](t, src.mustDo(op, http.MethodGet, "/api/v1/machines/"+id+"/export", nil, http.StatusOK))
	// No bearer token: the ticket is the authorisation.
	imported := into[api.Machine](t, dst.mustImport(ticket.Token, bundle, http.StatusOK))
	src.mustDo(op, http.MethodPost, "/api/v1/machines/"+id+"/finalize-migration", api.FinalizeRequest{RedirectEndpoint: dst.base}, http.StatusOK)

	sameObject(t, "drp2 birdy", seedAt(t, "The machine has migrated.", "drpcli machines show Name:birdy", dst.base),
		dst.mustDo(op, http.MethodGet, "/api/v1/machines/Name:birdy", nil, http.StatusOK).body)
	sameObject(t, "drp1 birdy", seedAt(t, "where it should redirect to.", "drpcli machines show Name:birdy", dst.base),
		src.mustDo(op, http.MethodGet, "/api/v1/machines/Name:birdy", nil, http.StatusOK).body)
	sameList(t, "drp2 jobs", seedAt(t, "The jobs have migrated as well.", birdyJobsCmd, dst.base),
		dst.mustDo(op, http.MethodGet, "/api/v1/jobs?Machine="+id, nil, http.StatusOK).body)
	sameList(t, "drp1 jobs", seedAt(t, "The original jobs on drp1 will still exist", birdyJobsCmd, dst.base),
		src.mustDo(op, http.MethodGet, "/api/v1/jobs?Machine="+id, nil, http.StatusOK).body)
	sameObject(t, "drp2 conflicting-profile", seedAt(t, "", "[admin@drp2 ~]$ drpcli profiles show conflicting-profile", ""),
		dst.mustDo(op, http.MethodGet, "/api/v1/profiles/conflicting-profile", nil, http.StatusOK).body)
	if p := into[api.Profile](t, dst.mustDo(op, http.MethodGet, "/api/v1/profiles/example-profile", nil, http.StatusOK)); p.Params["example/param"] != "from-drp1" {
		t.Fatalf("example-profile on the destination: %+v", p)
	}

	// The worker may crash after the import committed: the same import again is accepted.
	again := into[api.Machine](t, dst.mustImport(ticket.Token, bundle, http.StatusOK))
	if again.Uuid != imported.Uuid || again.Runnable || again.Available || len(again.Profiles) != len(imported.Profiles) {
		t.Fatalf("retried import answered %+v, first %+v", again, imported)
	}
	src.mustDo(op, http.MethodPost, "/api/v1/machines/"+id+"/finalize-migration", api.FinalizeRequest{RedirectEndpoint: dst.base}, http.StatusOK)

	// Refusals of a migrated stub and of a second migration.
	msg := src.do(op, http.MethodPost, "/api/v1/machines/"+id+"/quiesce", api.QuiesceRequest{Migration: "other"}).apiError(t, http.StatusConflict)
	if !strings.Contains(msg, "already migrated to "+dst.base) {
		t.Fatalf("quiesce of a stub: %s", msg)
	}
	src.do(op, http.MethodPost, "/api/v1/machines/"+id+"/activate", nil).apiError(t, http.StatusConflict)

	// Until activation the inactive copy is held by the migration that imported it.
	msg = dst.do(api.RoleAdmin, http.MethodDelete, "/api/v1/machines/"+id+"?force=true", nil).apiError(t, http.StatusConflict)
	if !strings.Contains(msg, "is held by migration the import of ticket "+ticket.ID) {
		t.Fatalf("delete of the inactive copy: %s", msg)
	}
	m := into[api.Machine](t, dst.mustDo(op, http.MethodPost, "/api/v1/machines/"+id+"/activate", nil, http.StatusOK))
	if !m.Runnable || !m.Available {
		t.Fatalf("activated machine: Runnable %v Available %v", m.Runnable, m.Available)
	}
	// Activation completed the import: replaying its ticket with another Secret changes nothing,
	// even once the machine is taken out of service.
	dst.mustDo(op, http.MethodPatch, "/api/v1/machines/"+id, map[string]any{"Runnable": false}, http.StatusOK)
	replay := bundle
	replay.Machine.Secret = "replayed-secret"
	msg = dst.importBundle(ticket.Token, replay).apiError(t, http.StatusConflict)
	if !strings.Contains(msg, "a ticket imports once") {
		t.Fatalf("replayed ticket: %s", msg)
	}
	if got := into[api.Machine](t, dst.mustDo(api.RoleAdmin, http.MethodGet, "/api/v1/machines/"+id, nil, http.StatusOK)); got.Secret != bundle.Machine.Secret {
		t.Fatalf("the replay changed the agent secret to %q", got.Secret)
	}

	// The stub keeps its snapshot: deleting it must name the migration that left it.
	msg = src.do(api.RoleAdmin, http.MethodDelete, "/api/v1/machines/"+id+"?force=true", nil).apiError(t, http.StatusConflict)
	if !strings.Contains(msg, "is held by migration "+migrationID) {
		t.Fatalf("delete of the stub: %s", msg)
	}
	src.mustDo(op, http.MethodDelete, "/api/v1/machines/"+id+"?migration="+migrationID, nil, http.StatusNoContent)
}

// TestDeleteGuardOverHTTP: a quiesced machine cannot be deleted, even by an admin with force,
// and the 409 names the migration (a DELETE mid-migration must not lose the machine); naming it releases the hold.
func TestDeleteGuardOverHTTP(t *testing.T) {
	t.Parallel()
	src, _ := seedRegions(t)
	id := seeddata.BirdyUUID
	src.mustDo(api.RoleOperator, http.MethodPost, "/api/v1/machines/"+id+"/quiesce", api.QuiesceRequest{Migration: migrationID}, http.StatusOK)
	for _, q := range []string{"", "?force=true", "?migration=migrate-machine/other"} {
		msg := src.do(api.RoleAdmin, http.MethodDelete, "/api/v1/machines/"+id+q, nil).apiError(t, http.StatusConflict)
		if !strings.Contains(msg, "is held by migration "+migrationID) {
			t.Fatalf("DELETE%s: %s", q, msg)
		}
	}
	src.mustDo(api.RoleOperator, http.MethodGet, "/api/v1/machines/"+id, nil, http.StatusOK)
	src.mustDo(api.RoleOperator, http.MethodPost, "/api/v1/machines/"+id+"/unquiesce", nil, http.StatusOK)
	src.mustDo(api.RoleOperator, http.MethodDelete, "/api/v1/machines/"+id, nil, http.StatusNoContent)
}

// TestMigrationCompensationsOverHTTP: restore and unquiesce give back the original machine.
func TestMigrationCompensationsOverHTTP(t *testing.T) {
	t.Parallel()
	src, _ := seedRegions(t)
	id := seeddata.BirdyUUID
	op := api.RoleOperator
	original := src.mustDo(op, http.MethodGet, "/api/v1/machines/"+id, nil, http.StatusOK).body

	src.mustDo(op, http.MethodPost, "/api/v1/machines/"+id+"/quiesce", api.QuiesceRequest{Migration: migrationID}, http.StatusOK)
	msg := src.do(op, http.MethodPost, "/api/v1/machines/"+id+"/quiesce", api.QuiesceRequest{Migration: "migrate-machine/other"}).apiError(t, http.StatusConflict)
	if !strings.Contains(msg, "already being migrated by "+migrationID) {
		t.Fatalf("second migration: %s", msg)
	}
	src.mustDo(op, http.MethodPost, "/api/v1/machines/"+id+"/finalize-migration", api.FinalizeRequest{RedirectEndpoint: "https://drp2:8092"}, http.StatusOK)
	restored := into[api.Machine](t, src.mustDo(op, http.MethodPost, "/api/v1/machines/"+id+"/restore-migration", nil, http.StatusOK))
	if restored.Runnable || restored.Meta[api.MetaMigrating] != migrationID || restored.Locked {
		t.Fatalf("restored machine %+v", restored)
	}
	got := src.mustDo(op, http.MethodPost, "/api/v1/machines/"+id+"/unquiesce", nil, http.StatusOK).body
	if !bytes.Equal(got, original) {
		t.Fatalf("after restore and unquiesce\n%s\nwant\n%s", got, original)
	}

	wom := src.create(api.KindMachines, api.Machine{Name: "wom", WorkOrderMode: true})["Uuid"].(string)
	msg = src.do(op, http.MethodPost, "/api/v1/machines/"+wom+"/quiesce", api.QuiesceRequest{Migration: migrationID}).apiError(t, http.StatusUnprocessableEntity)
	if !strings.Contains(msg, "WorkOrderMode") {
		t.Fatalf("quiesce in WorkOrderMode: %s", msg)
	}
	src.do(op, http.MethodPost, "/api/v1/machines/Name:nope/quiesce", api.QuiesceRequest{Migration: migrationID}).apiError(t, http.StatusNotFound)
	src.do(api.RoleReadonly, http.MethodPost, "/api/v1/machines/"+id+"/quiesce", api.QuiesceRequest{Migration: migrationID}).apiError(t, http.StatusForbidden)
}

// TestTicketRefusals: an import with a missing, malformed, forged, expired, foreign or spent
// ticket is refused with a message saying which, and changes nothing.
func TestTicketRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, dst := seedRegions(t)
	op := api.RoleOperator
	bundle := into[api.Bundle](t, src.mustDo(op, http.MethodGet, "/api/v1/machines/Name:birdy/export", nil, http.StatusOK))

	key, err := dst.st.TicketKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mint := func(key []byte, region string, now time.Time) string {
		s, err := tickets.NewSigner(key, region, dst.base)
		if err != nil {
			t.Fatal(err)
		}
		tk, err := s.Mint(now, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return tk.Token
	}
	valid := into[api.Ticket](t, dst.mustDo(op, http.MethodPost, "/api/v1/migrate-tickets", api.TicketRequest{TTL: time.Minute}, http.StatusCreated)).Token
	spent := into[api.Ticket](t, dst.mustDo(op, http.MethodPost, "/api/v1/migrate-tickets", nil, http.StatusCreated)).Token
	// A refused import does not spend its ticket.
	dst.mustImport(spent, api.Bundle{Machine: api.Machine{Name: "first"}}, http.StatusUnprocessableEntity)
	first := api.Bundle{Machine: api.Machine{Uuid: "0f000000-0000-4000-8000-000000000001", Name: "first"}}
	dst.mustImport(spent, first, http.StatusOK)
	otherKey, err := tickets.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	payload, _, _ := strings.Cut(valid, ".")

	cases := []struct {
		name   string
		ticket string
		code   int
		want   string
	}{
		{"missing", "", http.StatusUnauthorized, "an import needs a migrate ticket"},
		{"malformed", "not-a-ticket", http.StatusUnauthorized, "malformed ticket"},
		{"forged", mint(otherKey, "test-region", time.Now()), http.StatusUnauthorized, "signature does not verify"},
		{"tampered", payload + ".AAAA", http.StatusUnauthorized, "signature does not verify"},
		{"expired", mint(key, "test-region", time.Now().Add(-2*time.Hour)), http.StatusUnauthorized, "ticket expired at"},
		{"another region", mint(otherKey, "region-x", time.Now()), http.StatusForbidden, `minted by region "region-x"`},
		{"replayed", spent, http.StatusConflict, "was already used at"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msg := dst.importBundle(c.ticket, bundle).apiError(t, c.code)
			if !strings.Contains(msg, c.want) {
				t.Fatalf("error %q does not say %q", msg, c.want)
			}
			dst.mustDo(op, http.MethodGet, "/api/v1/machines/Name:birdy", nil, http.StatusNotFound)
		})
	}
	// The untouched valid ticket still works after all that.
	dst.mustImport(valid, bundle, http.StatusOK)

	// Minting: admins and operators only, within the TTL bounds.
	for role, code := range map[string]int{api.RoleReadonly: http.StatusForbidden, api.RoleRack: http.StatusForbidden, "": http.StatusUnauthorized} {
		dst.do(role, http.MethodPost, "/api/v1/migrate-tickets", nil).apiError(t, code)
	}
	dst.do(op, http.MethodPost, "/api/v1/migrate-tickets", api.TicketRequest{TTL: 25 * time.Hour}).apiError(t, http.StatusUnprocessableEntity)
}

// importBundle POSTs an import of b with ticket in its header and no bearer token.
func (e *env) importBundle(ticket string, b api.Bundle) response {
	e.t.Helper()
	body, err := json.Marshal(api.ImportRequest{Bundle: b})
	if err != nil {
		e.t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, e.base+"/api/v1/machines/import", bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set(api.TicketHeader, ticket)
	return send(e.t, req)
}

// mustImport is importBundle that expects status code.
func (e *env) mustImport(ticket string, b api.Bundle, code int) response {
	e.t.Helper()
	r := e.importBundle(ticket, b)
	if r.code != code {
		e.t.Fatalf("import: status %d, want %d: %s", r.code, code, r.body)
	}
	return r
}
