package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/region/api"
)

// readonlyToken is the token the test regions treat as a readonly user's; any other token
// (or none) is an operator's.
const (
	readonlyToken = "readonly-token"
	adminToken    = "admin-token"
)

// grantRoutes serves the grant endpoints of a test region: grants signed like the fake
// worker checks them, refused to the readonly token as a real region refuses them.
func grantRoutes(mux *http.ServeMux, name string) {
	who := func(req *http.Request) api.Whoami {
		switch req.Header.Get("Authorization") {
		case "Bearer " + readonlyToken:
			return api.Whoami{User: "ro", Role: api.RoleReadonly}
		case "Bearer " + adminToken:
			return api.Whoami{User: "root", Role: api.RoleAdmin}
		}
		return api.Whoami{User: "op", Role: api.RoleOperator}
	}
	mux.HandleFunc("GET /api/v1/whoami", func(w http.ResponseWriter, req *http.Request) { answer(w, http.StatusOK, who(req)) })
	mux.HandleFunc("POST /api/v1/migrate-grants", func(w http.ResponseWriter, req *http.Request) {
		caller := who(req)
		if caller.Role == api.RoleReadonly {
			answer(w, http.StatusForbidden, api.Error{Error: `role "readonly" may not write grants`, Code: http.StatusForbidden})
			return
		}
		var gr api.GrantRequest
		if err := json.NewDecoder(req.Body).Decode(&gr); err != nil {
			answer(w, http.StatusBadRequest, api.Error{Error: err.Error(), Code: http.StatusBadRequest})
			return
		}
		g, err := signers[name].MintGrant(time.Now(), gr.TTL, api.GrantClaims{Kind: gr.Kind, Subject: gr.Key, Selector: gr.Selector, TargetRegion: gr.TargetRegion, GrantedTo: caller.User})
		if err != nil {
			answer(w, http.StatusUnprocessableEntity, api.Error{Error: err.Error(), Code: http.StatusUnprocessableEntity})
			return
		}
		answer(w, http.StatusCreated, g)
	})
	mux.HandleFunc("DELETE /api/v1/migrate-grants/{id}", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
}

// checkGrant is the fake worker's ValidateMigration check of the grant, as the source region
// makes it: signed by the source, for this machine (or a bulk selection) and target.
func checkGrant(in activities.ValidateInput) error {
	refuse := func(why string) error {
		return temporal.NewNonRetryableApplicationError("grant refused: "+why, activities.ErrGrantRefused, nil)
	}
	s, ok := signers[in.SourceRegion]
	if !ok {
		return nil // the unknown region is ValidateMigration's to report
	}
	c, err := s.VerifyGrant(in.Grant, time.Now())
	switch {
	case err != nil:
		return refuse(err.Error())
	case c.TargetRegion != in.TargetRegion:
		return refuse("for another target")
	case c.Kind == api.GrantMachine && c.Subject != in.Machine, c.Kind == api.GrantRack:
		return refuse("for another machine")
	}
	return nil
}

// TestReadonlyTokenCannotMove: a readonly token gets the source's 403 and no workflow starts
// and no grant is issued; it cannot cancel a migration either, and list needs a token the region
// accepts.
func TestReadonlyTokenCannotMove(t *testing.T) {
	s := newMigrationSetup(t)
	t.Setenv(envToken, readonlyToken)
	code, _, stderr := ironflow(t, s.source.url, "machines", "migrate", s.machine, "--to", "region-b")
	if code == 0 || !strings.Contains(stderr, "did not authorise the move") || !strings.Contains(stderr, "403") {
		t.Fatalf("readonly migrate: exit %d, %s", code, stderr)
	}
	if _, err := s.tc.DescribeWorkflowExecution(t.Context(), s.workflowID, ""); err == nil {
		t.Fatal("a readonly token started a migration")
	}
	code, _, stderr = ironflow(t, s.source.url, "migrations", "cancel", s.machine)
	if code == 0 || !strings.Contains(stderr, "has role readonly") {
		t.Fatalf("readonly cancel: exit %d, %s", code, stderr)
	}
	t.Setenv(envToken, "")
	code, _, stderr = ironflow(t, "http://127.0.0.1:1", "migrations", "list")
	if code == 0 || !strings.Contains(stderr, "migrations are shown to users of a region only") {
		t.Fatalf("list without a region: exit %d, %s", code, stderr)
	}
}
