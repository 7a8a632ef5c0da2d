package server

import (
	"context"
	"net/http"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

// migrationUndoRoutes registers the undo of an import whose agent may have moved
// (store.RedirectCopy): POST .../machines/{key}/redirect-copy with a RedirectCopyRequest, and
// the audit of an operator's answer to a stuck undo (api.CompensationDecision) and of an
// operator's control of a move (api.MoveControl).
func (s *Server) migrationUndoRoutes() {
	item := api.PathPrefix + "/" + api.KindMachines + "/{key}"
	s.handle(route{pattern: "POST " + item + "/redirect-copy", resource: api.KindMachines, write: true, h: s.redirectCopy})
	s.handle(route{pattern: "POST " + item + "/compensation-decisions", resource: api.KindMachines, write: true, h: s.recordCompensationDecision})
	s.handle(route{pattern: "POST " + api.PathPrefix + "/" + api.KindMoveControls, resource: api.KindMachines, write: true, h: s.recordMoveControl})
}

// recordMoveControl audits an operator's control of a bulk migration or rack transfer
// (api.MoveControl).
func (s *Server) recordMoveControl(w http.ResponseWriter, r *http.Request, c *call) error {
	var mc api.MoveControl
	if err := decodeBody(w, r, &mc); err != nil {
		return err
	}
	if err := s.st.RecordMoveControl(r.Context(), c.by, mc); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// recordCompensationDecision audits an operator's answer to a stuck compensation
// (api.CompensationDecision).
func (s *Server) recordCompensationDecision(w http.ResponseWriter, r *http.Request, c *call) error {
	var d api.CompensationDecision
	if err := decodeBody(w, r, &d); err != nil {
		return err
	}
	if err := s.st.RecordCompensationDecision(r.Context(), c.by, r.PathValue("key"), d); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) redirectCopy(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.RedirectCopyRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	return s.machineAction(func(ctx context.Context, by store.Principal, key string) (api.Machine, error) {
		return s.st.RedirectCopy(store.ForMigration(ctx, req.Migration), by, key, req.RedirectEndpoint)
	})(w, r, c)
}
