package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

// rackRoutes registers the rack controller API (region/api/rack.go).
func (s *Server) rackRoutes() {
	p := api.PathPrefix + "/" + api.KindRacks
	s.handle(route{pattern: "GET " + p + "/secret", resource: resRackSecret, h: s.showRackSecret})
	s.handle(route{pattern: "POST " + p + "/register", public: true, h: s.registerRack})
	s.handle(route{pattern: "GET " + p + "/{uuid}/config", resource: resRackAPI, h: s.rackConfig})
	s.handle(route{pattern: "POST " + p + "/{uuid}/heartbeat", resource: resRackAPI, write: true, h: s.rackHeartbeat})
	s.handle(route{pattern: "POST " + p + "/{uuid}/leases", resource: resRackAPI, write: true, h: s.syncRackLeases})
}

// rackSecret is the configured secret, else the one stored in the database.
func (s *Server) rackSecret(r *http.Request) (string, error) {
	if s.cfg.RackSecret != "" {
		return s.cfg.RackSecret, nil
	}
	return s.st.RackSecret(r.Context())
}

func (s *Server) showRackSecret(w http.ResponseWriter, r *http.Request, _ *call) error {
	secret, err := s.rackSecret(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.RackSecret{Secret: secret})
	return nil
}

// registerRack is authorised by the rack secret rather than a token: a rack has no token yet.
func (s *Server) registerRack(w http.ResponseWriter, r *http.Request, _ *call) error {
	given, err := bearer(r)
	if err != nil {
		return err
	}
	secret, err := s.rackSecret(r)
	if err != nil {
		return err
	}
	if subtle.ConstantTimeCompare([]byte(given), []byte(secret)) != 1 {
		return errorf(http.StatusUnauthorized, "wrong rack secret (see `ironflow racks secret` on the region)")
	}
	var reg api.RackRegistration
	if err := decodeBody(w, r, &reg); err != nil {
		return err
	}
	info, err := s.regionInfo(r.Context())
	if err != nil {
		return err
	}
	rack, tok, err := s.st.RegisterRack(r.Context(), reg, info.Endpoints)
	if err != nil {
		return err
	}
	s.log.Info("rack registered", "rack", rack.Uuid, "name", rack.Name, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, api.RackRegistered{Rack: rack, Token: tok.Token, Region: info})
	return nil
}

// ownRack returns the canonical UUID of the path's rack, refusing a rack token of another rack.
func ownRack(r *http.Request, c *call) (string, error) {
	raw := r.PathValue("uuid")
	id, err := uuid.Parse(raw)
	if err != nil {
		return "", errorf(http.StatusUnprocessableEntity, "rack %q is not a UUID", raw)
	}
	if c.by.Role == api.RoleRack && c.by.User != store.RackUser(id.String()) {
		return "", errorf(http.StatusForbidden, "the token of %s may only access its own rack, not %s", c.by.User, id)
	}
	return id.String(), nil
}

// rackConfig answers with the rack's config and an ETag (a hash of the body); a request whose
// If-None-Match holds that ETag gets 304 Not Modified.
func (s *Server) rackConfig(w http.ResponseWriter, r *http.Request, c *call) error {
	id, err := ownRack(r, c)
	if err != nil {
		return err
	}
	cfg, err := s.st.RackConfig(r.Context(), id)
	if err != nil {
		return err
	}
	body, err := json.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("encode rack config: %w", err)
	}
	sum := sha256.Sum256(body)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	w.Header().Set("ETag", etag)
	if etagMatches(r.Header.Get("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(append(body, '\n'))
	return nil
}

// etagMatches applies If-None-Match (RFC 9110 13.1.2, weak comparison) to etag.
func etagMatches(header, etag string) bool {
	for tag := range strings.SplitSeq(header, ",") {
		tag = strings.TrimSpace(tag)
		if tag == "*" || strings.TrimPrefix(tag, "W/") == etag {
			return true
		}
	}
	return false
}

func (s *Server) rackHeartbeat(w http.ResponseWriter, r *http.Request, c *call) error {
	id, err := ownRack(r, c)
	if err != nil {
		return err
	}
	var hb api.RackHeartbeat
	if err := decodeBody(w, r, &hb); err != nil {
		return err
	}
	rack, err := s.st.RackHeartbeat(r.Context(), id, hb)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rack)
	return nil
}

func (s *Server) syncRackLeases(w http.ResponseWriter, r *http.Request, c *call) error {
	id, err := ownRack(r, c)
	if err != nil {
		return err
	}
	var batch []api.Lease
	if err := decodeBody(w, r, &batch); err != nil {
		return err
	}
	res, err := s.st.SyncLeases(r.Context(), c.by, id, batch)
	if err != nil {
		return err
	}
	if res.Skipped > 0 {
		s.log.Warn("rack sent leases of unknown subnets; skipped them", "rack", id, "skipped", res.Skipped)
	}
	writeJSON(w, http.StatusOK, api.LeaseSyncResult{Stored: res.Stored})
	return nil
}
