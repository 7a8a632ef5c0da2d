package server

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/tickets"
)

// resGrants is issuing (write: admin, operator) and verifying (read) migrate grants.
const resGrants = "grants"

// grantRoutes registers the grant endpoints (region/api/grants.go).
func (s *Server) grantRoutes() {
	p := api.PathPrefix
	s.handle(route{pattern: "POST " + p + "/migrate-grants", resource: resGrants, write: true, h: s.issueGrant})
	s.handle(route{pattern: "POST " + p + "/migrate-grants/verify", resource: resGrants, h: s.verifyGrant})
	s.handle(route{pattern: "DELETE " + p + "/migrate-grants/{id}", resource: resGrants, write: true, h: s.revokeGrant})
	s.handle(route{pattern: "GET " + p + "/whoami", resource: resGrants, h: s.whoami})
}

func (s *Server) whoami(w http.ResponseWriter, _ *http.Request, c *call) error {
	writeJSON(w, http.StatusOK, api.Whoami{User: c.by.User, Role: c.by.Role})
	return nil
}

// issueGrant authorises the caller's move of a machine, a rack or a bulk selection of this
// region to another region.
func (s *Server) issueGrant(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.GrantRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	switch {
	case regionLocal(req.Kind) && req.TargetRegion != "":
		return errorf(http.StatusUnprocessableEntity, "a %s grant authorises work in region %s and names no TargetRegion", req.Kind, s.cfg.Name)
	case !regionLocal(req.Kind) && strings.TrimSpace(req.TargetRegion) == "":
		return errorf(http.StatusUnprocessableEntity, "a grant needs the TargetRegion of the move")
	case req.TargetRegion == s.cfg.Name:
		return errorf(http.StatusUnprocessableEntity, "a move from region %s to itself needs no grant", s.cfg.Name)
	case req.TTL < 0 || req.TTL > api.MaxGrantTTL:
		return errorf(http.StatusUnprocessableEntity, "grant TTL %s is outside (0, %s]; 0 means %s", req.TTL, api.MaxGrantTTL, api.DefaultGrantTTL)
	}
	claims := api.GrantClaims{Kind: req.Kind, TargetRegion: req.TargetRegion, GrantedTo: c.by.User}
	var err error
	switch req.Kind {
	case api.GrantMachine:
		claims.Subject, err = s.uuidOf(r.Context(), api.KindMachines, req.Key)
	case api.GrantRack:
		claims.Subject, err = s.uuidOf(r.Context(), api.KindRacks, req.Key)
	case api.GrantPod:
		claims.Subject, err = s.uuidOf(r.Context(), api.KindPods, req.Key)
	case api.GrantPower:
		claims.Subject, err = s.unheldMachine(r.Context(), req.Key)
	case api.GrantBulk:
		if req.Selector.Pool == "" && req.Selector.Rack == "" && len(req.Selector.Names) == 0 {
			return errorf(http.StatusUnprocessableEntity, "a bulk grant needs a selector: a pool, a rack or machine names")
		}
		claims.Selector = req.Selector
	default:
		return errorf(http.StatusUnprocessableEntity, "grant Kind %q is not one of %s, %s, %s, %s, %s", req.Kind, api.GrantMachine, api.GrantRack, api.GrantBulk, api.GrantPod, api.GrantPower)
	}
	if err != nil {
		return err
	}
	signer, err := s.ticketSigner(r.Context())
	if err != nil {
		return err
	}
	g, err := signer.MintGrant(time.Now(), req.TTL, claims)
	if err != nil {
		return err
	}
	if err := s.st.RecordGrant(r.Context(), c.by, g.GrantClaims); err != nil {
		return err
	}
	s.log.Info("migrate grant issued", "grant", g.ID, "kind", g.Kind, "subject", g.Subject, "target", g.TargetRegion, "to", c.by.User)
	writeJSON(w, http.StatusCreated, g)
	return nil
}

// uuidOf resolves the key of a machine, rack or pod to its UUID.
func (s *Server) uuidOf(ctx context.Context, kind, key string) (string, error) {
	if strings.TrimSpace(key) == "" {
		return "", errorf(http.StatusUnprocessableEntity, "a %s grant needs the Key of the %s", kind, kind)
	}
	switch kind {
	case api.KindRacks:
		var rk api.Rack
		return rk.Uuid, s.st.Get(ctx, kind, key, &rk)
	case api.KindPods:
		var p api.Pod
		return p.Uuid, s.st.Get(ctx, kind, key, &p)
	default:
		var m api.Machine
		err := s.st.Get(ctx, kind, key, &m)
		return m.Uuid, err
	}
}

// verifyGrant answers whether a grant this region issued covers a move, and audits the move
// with who started it.
func (s *Server) verifyGrant(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.GrantCheck
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	if req.Grant == "" {
		return errorf(http.StatusUnauthorized, "no migrate grant: ask the source region for one (POST %s/migrate-grants)", api.PathPrefix)
	}
	signer, err := s.ticketSigner(r.Context())
	if err != nil {
		return err
	}
	claims, err := signer.VerifyGrant(req.Grant, time.Now())
	if errors.Is(err, tickets.ErrExpired) && req.Move != "" && req.Move != req.Migration && req.MoveRun != "" {
		// A child of a move the grant let start: it may finish (GrantCheck.Move).
		started, serr := s.st.GrantStartedMove(r.Context(), claims.ID, req.Move, req.MoveRun)
		if serr != nil {
			return serr
		}
		if started {
			err = nil
		}
	}
	switch {
	case errors.Is(err, tickets.ErrWrongRegion), errors.Is(err, tickets.ErrWrongScope):
		return errorf(http.StatusForbidden, "migrate grant refused: %v", err)
	case err != nil:
		return errorf(http.StatusUnauthorized, "migrate grant refused: %v", err)
	}
	if err := s.st.CheckGrantRecord(r.Context(), claims.ID); err != nil {
		return err
	}
	if claims.TargetRegion != req.TargetRegion {
		return errorf(http.StatusForbidden, "migrate grant %s is for a move to region %q, not to %q", claims.ID, claims.TargetRegion, req.TargetRegion)
	}
	kind, key, err := s.covered(r.Context(), claims, req)
	if err != nil {
		return err
	}
	if err := s.st.RecordGrantUse(r.Context(), c.by, kind, key, claims, req); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, claims)
	return nil
}

// covered checks that the grant covers moving req's object and returns the audit event's
// kind and key for it.
func (s *Server) covered(ctx context.Context, g api.GrantClaims, req api.GrantCheck) (kind, key string, err error) {
	refuse := func() error {
		return errorf(http.StatusForbidden, "migrate grant %s (%s %s%s) does not cover moving %s %s", g.ID, g.Kind, g.Subject, selectorText(g), req.Kind, req.Key)
	}
	switch req.Kind {
	case api.GrantMachine:
		var m api.Machine
		if err := s.st.Get(ctx, api.KindMachines, req.Key, &m); err != nil {
			return "", "", err
		}
		sel := g.Selector
		ok := g.Kind == api.GrantMachine && g.Subject == m.Uuid ||
			g.Kind == api.GrantRack && m.Rack != "" && g.Subject == m.Rack ||
			g.Kind == api.GrantBulk && (len(sel.Names) > 0 && slices.Contains(sel.Names, m.Name) ||
				len(sel.Names) == 0 && (sel.Pool == "" || sel.Pool == m.Pool) && (sel.Rack == "" || sel.Rack == m.Rack))
		if !ok {
			return "", "", refuse()
		}
		return api.KindMachines, m.Uuid, nil
	case api.GrantRack:
		id, err := s.uuidOf(ctx, api.KindRacks, req.Key)
		if err != nil {
			return "", "", err
		}
		if g.Kind != api.GrantRack || g.Subject != id {
			return "", "", refuse()
		}
		return api.KindRacks, id, nil
	case api.GrantPod:
		id, err := s.uuidOf(ctx, api.KindPods, req.Key)
		if err != nil {
			return "", "", err
		}
		if g.Kind != api.GrantPod || g.Subject != id {
			return "", "", refuse()
		}
		return api.KindPods, id, nil
	case api.GrantPower:
		id, err := s.unheldMachine(ctx, req.Key)
		if err != nil {
			return "", "", err
		}
		if g.Kind != api.GrantPower || g.Subject != id {
			return "", "", refuse()
		}
		return api.KindMachines, id, nil
	case api.GrantBulk:
		if g.Kind != api.GrantBulk {
			return "", "", refuse()
		}
		return eventKindBulk, g.ID, nil
	}
	return "", "", errorf(http.StatusUnprocessableEntity, "grant check Kind %q is not one of %s, %s, %s, %s, %s", req.Kind, api.GrantMachine, api.GrantRack, api.GrantBulk, api.GrantPod, api.GrantPower)
}

// regionLocal says whether a grant kind authorises work in the issuing region (no move).
func regionLocal(kind string) bool { return kind == api.GrantPod || kind == api.GrantPower }

// unheldMachine resolves a machine key to its UUID and refuses (409, naming the holder) a
// machine a migration holds: its power must not change while it changes region.
func (s *Server) unheldMachine(ctx context.Context, key string) (string, error) {
	if strings.TrimSpace(key) == "" {
		return "", errorf(http.StatusUnprocessableEntity, "a power grant needs the Key of the machine")
	}
	m, holder, err := s.st.PowerHold(ctx, key)
	if err != nil {
		return "", err
	}
	if holder != "" {
		return "", errorf(http.StatusConflict, "machine %s is held by migration %s: no power action until it ends", m.Name, holder)
	}
	return m.Uuid, nil
}

// eventKindBulk is the Kind of the audit event of an authorised bulk migration.
const eventKindBulk = "bulk-migrations"

func selectorText(g api.GrantClaims) string {
	if g.Kind != api.GrantBulk {
		return ""
	}
	return g.Selector.String()
}

func (s *Server) revokeGrant(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := s.st.RevokeGrant(r.Context(), c.by, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
