package server

import (
	"cmp"
	"crypto/subtle"
	"errors"
	"net/http"
	"net/netip"

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
	s.handle(route{pattern: "PUT " + p + "/{uuid}/pods/{pod}/facts", resource: resRackAPI, write: true, h: s.storePodFacts})
	s.handle(route{pattern: "POST " + p + "/{uuid}/pods/{pod}/vms", resource: resRackAPI, write: true, h: s.declarePodVM})
	s.handle(route{pattern: "DELETE " + p + "/{uuid}/pods/{pod}/vms/{machine}", resource: resRackAPI, write: true, h: s.forgetPodVM})
}

func (s *Server) storePodFacts(w http.ResponseWriter, r *http.Request, c *call) error {
	id, err := ownRack(r, c)
	if err != nil {
		return err
	}
	var f api.PodFacts
	if err := decodeBodyForStore(w, r, &f); err != nil {
		return err
	}
	pod, err := s.st.StorePodFacts(r.Context(), c.by, id, r.PathValue("pod"), f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, pod)
	return nil
}

func (s *Server) declarePodVM(w http.ResponseWriter, r *http.Request, c *call) error {
	id, err := ownRack(r, c)
	if err != nil {
		return err
	}
	var m api.Machine
	if err := decodeBodyForStore(w, r, &m); err != nil {
		return err
	}
	m, err = s.st.DeclarePodVM(r.Context(), c.by, id, r.PathValue("pod"), m)
	if err != nil {
		return err
	}
	redactions[api.KindMachines](&m) // the rack has no use for the agent credential
	writeJSON(w, http.StatusOK, m)
	return nil
}

func (s *Server) forgetPodVM(w http.ResponseWriter, r *http.Request, c *call) error {
	id, err := ownRack(r, c)
	if err != nil {
		return err
	}
	if err := s.st.ForgetPodVM(r.Context(), c.by, id, r.PathValue("pod"), r.PathValue("machine")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
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

// registerRack is authorised by the rack secret, the rack's own token or an admin token. The
// shared secret only claims a rack identity this region holds no credential for (a new rack,
// or one an operator created or a transfer imported); re-registering a rack that has one
// takes its own token or an admin, so the secret cannot take another rack over.
func (s *Server) registerRack(w http.ResponseWriter, r *http.Request, _ *call) error {
	reclaim, err := s.registrationCredential(r)
	if err != nil {
		return err
	}
	var reg api.RackRegistration
	if err := decodeBody(w, r, &reg); err != nil {
		return err
	}
	if reclaim.User != "" && reclaim.Role == api.RoleRack {
		if id, err := uuid.Parse(reg.Uuid); err != nil || reclaim.User != store.RackUser(id.String()) {
			return errorf(http.StatusForbidden, "the token of %s may only register its own rack, not %q", reclaim.User, reg.Uuid)
		}
	}
	info, err := s.regionInfo(r.Context())
	if err != nil {
		return err
	}
	rack, tok, err := s.st.RegisterRack(r.Context(), reg, info.Endpoints, reclaim.User != "")
	if err != nil {
		return err
	}
	s.log.Info("rack registered", "rack", rack.Uuid, "name", rack.Name, "remote", r.RemoteAddr, "by", cmp.Or(reclaim.User, "rack secret"))
	writeJSON(w, http.StatusOK, api.RackRegistered{Rack: rack, Token: tok.Token, Region: info})
	return nil
}

// registrationCredential checks the bearer of a registration: the rack secret (zero
// principal), else a rack or admin token (its principal).
func (s *Server) registrationCredential(r *http.Request) (store.Principal, error) {
	given, err := bearer(r)
	if err != nil {
		return store.Principal{}, err
	}
	secret, err := s.rackSecret(r)
	if err != nil {
		return store.Principal{}, err
	}
	if subtle.ConstantTimeCompare([]byte(given), []byte(secret)) == 1 {
		return store.Principal{}, nil
	}
	by, err := s.st.Authenticate(r.Context(), given)
	if errors.Is(err, store.ErrUnauthorized) {
		return store.Principal{}, errorf(http.StatusUnauthorized, "neither the rack secret (see `ironflow racks secret` on the region) nor a rack or admin token")
	}
	if err != nil {
		return store.Principal{}, err
	}
	if by.Role != api.RoleRack && by.Role != api.RoleAdmin {
		return store.Principal{}, errorf(http.StatusForbidden, "role %q may not register racks", by.Role)
	}
	return by, nil
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
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		s.dns.RackSeen(id, ap.Addr())
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
	if err := decodeBodyForStore(w, r, &batch); err != nil {
		return err
	}
	res, err := s.st.SyncLeases(r.Context(), c.by, id, batch)
	if err != nil {
		return err
	}
	out := api.LeaseSyncResult{Stored: res.Stored}
	for _, rej := range res.Rejected {
		s.metrics.leasesRejected.WithLabelValues(rej.Reason).Inc()
		out.Rejected = append(out.Rejected, rej.LeaseRejection)
	}
	if len(out.Rejected) > 0 {
		s.log.Warn("rack sent leases the region refused", "rack", id, "rejected", len(out.Rejected), "first", out.Rejected[0].Error)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
