package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/dev/seeddata"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/tickets"
)

// TestMigrateGrants: only an operator or admin of the source gets a grant; the grant covers
// exactly its machine (or rack, or selector) and target, and a forged, expired, revoked or
// misused one is refused.
func TestMigrateGrants(t *testing.T) {
	t.Parallel()
	src, _ := seedRegions(t)
	op, ro := api.RoleOperator, api.RoleReadonly
	birdy := seeddata.BirdyUUID
	rack := src.create(api.KindRacks, api.Rack{Name: "rack-1", Status: api.RackOnline})["Uuid"].(string)
	src.create(api.KindPools, api.Pool{Name: "blue"})
	inRack := src.create(api.KindMachines, api.Machine{Name: "racked", Rack: rack, Pool: "blue"})["Uuid"].(string)
	grants := "/api/v1/migrate-grants"
	issue := func(req api.GrantRequest) api.Grant {
		return into[api.Grant](t, src.mustDo(op, http.MethodPost, grants, req, http.StatusCreated))
	}
	verify := func(token, kind, key, target string) response {
		return src.do(ro, http.MethodPost, grants+"/verify", api.GrantCheck{Grant: token, Kind: kind, Key: key, TargetRegion: target, Migration: "migrate-machine/" + key})
	}

	for role, code := range map[string]int{ro: http.StatusForbidden, api.RoleRack: http.StatusForbidden, "": http.StatusUnauthorized} {
		src.do(role, http.MethodPost, grants, api.GrantRequest{Kind: api.GrantMachine, Key: "Name:birdy", TargetRegion: "region-b"}).apiError(t, code)
	}
	src.do(op, http.MethodPost, grants, api.GrantRequest{Kind: api.GrantMachine, Key: "Name:birdy"}).apiError(t, http.StatusUnprocessableEntity)
	src.do(op, http.MethodPost, grants, api.GrantRequest{Kind: api.GrantMachine, Key: "Name:nope", TargetRegion: "region-b"}).apiError(t, http.StatusNotFound)

	g := issue(api.GrantRequest{Kind: api.GrantMachine, Key: "Name:birdy", TargetRegion: "region-b"})
	if g.Subject != birdy || g.GrantedTo != "operator-user" || time.Until(time.Unix(g.Expires, 0)) > api.DefaultGrantTTL {
		t.Fatalf("grant %+v", g.GrantClaims)
	}
	if got := into[api.GrantClaims](t, verify(g.Token, api.GrantMachine, "Name:birdy", "region-b")); got.ID != g.ID {
		t.Fatalf("verified %+v", got)
	}
	events := into[[]api.Event](t, src.mustDo(api.RoleAdmin, http.MethodGet, "/api/v1/events?Kind=machines&Key="+birdy, nil, http.StatusOK))
	if len(events) == 0 || events[0].Action != "migration-authorized" || events[0].Details["StartedBy"] != "operator-user" {
		t.Fatalf("audit of the authorised move: %+v", events)
	}

	key, err := src.st.TicketKey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	signer, err := tickets.NewSigner(key, "test-region", src.base)
	if err != nil {
		t.Fatal(err)
	}
	expired, err := signer.MintGrant(time.Now().Add(-time.Hour), time.Minute, g.GrantClaims)
	if err != nil {
		t.Fatal(err)
	}
	otherKey, _ := tickets.NewKey()
	forger, _ := tickets.NewSigner(otherKey, "test-region", src.base)
	forged, _ := forger.MintGrant(time.Now(), 0, g.GrantClaims)
	unrecorded, _ := signer.MintGrant(time.Now(), 0, g.GrantClaims) // signed right, never issued
	ticket := into[api.Ticket](t, src.mustDo(op, http.MethodPost, "/api/v1/migrate-tickets", nil, http.StatusCreated)).Token
	revoked := issue(api.GrantRequest{Kind: api.GrantMachine, Key: birdy, TargetRegion: "region-b", TTL: 24 * time.Hour})
	src.mustDo(op, http.MethodDelete, grants+"/"+revoked.ID, nil, http.StatusNoContent)

	cases := []struct {
		name, token, kind, key, target string
		code                           int
		want                           string
	}{
		{"none", "", api.GrantMachine, birdy, "region-b", http.StatusUnauthorized, "no migrate grant"},
		{"forged", forged.Token, api.GrantMachine, birdy, "region-b", http.StatusUnauthorized, "signature does not verify"},
		{"expired", expired.Token, api.GrantMachine, birdy, "region-b", http.StatusUnauthorized, "ticket expired"},
		{"never issued", unrecorded.Token, api.GrantMachine, birdy, "region-b", http.StatusUnauthorized, "was not issued by this region"},
		{"revoked", revoked.Token, api.GrantMachine, birdy, "region-b", http.StatusUnauthorized, "was revoked at"},
		{"another target", g.Token, api.GrantMachine, birdy, "region-c", http.StatusForbidden, `not to "region-c"`},
		{"another machine", g.Token, api.GrantMachine, inRack, "region-b", http.StatusForbidden, "does not cover moving machine"},
		{"a rack", g.Token, api.GrantRack, rack, "region-b", http.StatusForbidden, "does not cover moving rack"},
		{"an import ticket", ticket, api.GrantMachine, birdy, "region-b", http.StatusForbidden, "scope"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if msg := verify(c.token, c.kind, c.key, c.target).apiError(t, c.code); !strings.Contains(msg, c.want) {
				t.Fatalf("error %q does not say %q", msg, c.want)
			}
		})
	}
	// A grant is no import ticket either.
	bundle := into[api.Bundle](t, src.mustDo(op, http.MethodGet, "/api/v1/machines/"+birdy+"/export", nil, http.StatusOK))
	src.importBundle(g.Token, bundle).apiError(t, http.StatusForbidden)

	// A rack grant covers the rack and its machines; a bulk grant the machines its selector matches.
	rg := issue(api.GrantRequest{Kind: api.GrantRack, Key: "Name:rack-1", TargetRegion: "region-b"})
	for _, k := range [][2]string{{api.GrantRack, rack}, {api.GrantMachine, inRack}} {
		into[api.GrantClaims](t, verify(rg.Token, k[0], k[1], "region-b"))
	}
	verify(rg.Token, api.GrantMachine, birdy, "region-b").apiError(t, http.StatusForbidden)
	bg := issue(api.GrantRequest{Kind: api.GrantBulk, Selector: api.GrantSelector{Pool: "blue"}, TargetRegion: "region-b", TTL: 30 * 24 * time.Hour})
	into[api.GrantClaims](t, verify(bg.Token, api.GrantMachine, inRack, "region-b"))
	into[api.GrantClaims](t, verify(bg.Token, api.GrantBulk, "", "region-b"))
	verify(bg.Token, api.GrantMachine, birdy, "region-b").apiError(t, http.StatusForbidden)

	// whoami tells any token its user and role, and refuses none.
	if w := into[api.Whoami](t, src.mustDo(ro, http.MethodGet, "/api/v1/whoami", nil, http.StatusOK)); w.User != "readonly-user" || w.Role != ro {
		t.Fatalf("whoami %+v", w)
	}
	src.do("", http.MethodGet, "/api/v1/whoami", nil).apiError(t, http.StatusUnauthorized)
}

// TestAnExpiredGrantStillCoversTheMoveItStarted: a grant that let a move start (the root's own
// check passed) still covers that move's children after it expires, so a transfer paused or
// slowed past the grant's TTL finishes; it covers nothing else once expired: not another
// move, not a later move under the same workflow ID (another run chain), not a root's own
// check, not a grant no root ever used, not a machine outside it, and not after it is revoked.
func TestAnExpiredGrantStillCoversTheMoveItStarted(t *testing.T) {
	t.Parallel()
	src, _ := seedRegions(t)
	op, ro := api.RoleOperator, api.RoleReadonly
	rack := src.create(api.KindRacks, api.Rack{Name: "rack-1", Status: api.RackOnline})["Uuid"].(string)
	inRack := src.create(api.KindMachines, api.Machine{Name: "racked", Rack: rack})["Uuid"].(string)
	grants := "/api/v1/migrate-grants"
	issue := func() api.Grant {
		req := api.GrantRequest{Kind: api.GrantRack, Key: rack, TargetRegion: "region-b", TTL: 2 * time.Second}
		return into[api.Grant](t, src.mustDo(op, http.MethodPost, grants, req, http.StatusCreated))
	}
	transfer := "transfer-rack/" + rack
	// A root's own check names its run; a child's names its root and the root's first run.
	check := func(token, kind, key, migration, move, run string) response {
		return src.do(ro, http.MethodPost, grants+"/verify", api.GrantCheck{Grant: token, Kind: kind, Key: key, TargetRegion: "region-b",
			Migration: migration, Move: move, MoveRun: run})
	}
	child := func(token, machine, move, run string) response {
		return check(token, api.GrantMachine, machine, "migrate-machine/"+machine, move, run)
	}

	g, unused := issue(), issue()
	into[api.GrantClaims](t, check(g.Token, api.GrantRack, rack, transfer, "", "run-1")) // the transfer's own check
	testutil.Eventually(t, 10*time.Second, "the grant expired", func() bool {
		return check(g.Token, api.GrantRack, rack, transfer, "", "run-1").code == http.StatusUnauthorized
	})
	if got := into[api.GrantClaims](t, child(g.Token, inRack, transfer, "run-1")); got.ID != g.ID {
		t.Fatalf("a child of the transfer the grant started, after it expired: %+v", got)
	}
	events := into[[]api.Event](t, src.mustDo(api.RoleAdmin, http.MethodGet, "/api/v1/events?Kind=machines&Key="+inRack, nil, http.StatusOK))
	if len(events) == 0 || events[0].Action != "migration-authorized" || events[0].Details["Move"] != transfer {
		t.Fatalf("audit of the child's authorised move: %+v", events)
	}
	for name, r := range map[string]response{
		"a child of another move":                   child(g.Token, inRack, "transfer-rack/"+seeddata.BirdyUUID, "run-1"),
		"a child of a later move under the same ID": child(g.Token, inRack, transfer, "run-2"),
		"a child naming no run":                     child(g.Token, inRack, transfer, ""),
		"a root's own check":                        check(g.Token, api.GrantRack, rack, transfer, "", "run-1"),
		"a child claiming to be its own root":       check(g.Token, api.GrantMachine, inRack, transfer, transfer, "run-1"),
		"a grant no move started with":              child(unused.Token, inRack, transfer, "run-1"),
	} {
		if msg := r.apiError(t, http.StatusUnauthorized); !strings.Contains(msg, "ticket expired") {
			t.Errorf("%s, the grant expired: %q, want that it expired", name, msg)
		}
	}
	if msg := child(g.Token, seeddata.BirdyUUID, transfer, "run-1").apiError(t, http.StatusForbidden); !strings.Contains(msg, "does not cover") {
		t.Errorf("a machine outside the rack: %q", msg)
	}
	src.mustDo(op, http.MethodDelete, grants+"/"+g.ID, nil, http.StatusNoContent)
	if msg := child(g.Token, inRack, transfer, "run-1").apiError(t, http.StatusUnauthorized); !strings.Contains(msg, "was revoked at") {
		t.Errorf("a child of the transfer after the grant was revoked: %q", msg)
	}
}
