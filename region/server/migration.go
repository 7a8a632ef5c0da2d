package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
	"github.com/ironflow/ironflow/region/tickets"
)

// resTickets is minting migrate tickets: a write, so admin and operator only.
const resTickets = "tickets"

// migrationRoutes registers the migration endpoints (region/api/migration.go).
func (s *Server) migrationRoutes() {
	p := api.PathPrefix
	item := p + "/" + api.KindMachines + "/{key}"
	s.handle(route{pattern: "POST " + p + "/migrate-tickets", resource: resTickets, write: true, h: s.mintTicket})
	s.handle(route{pattern: "POST " + item + "/quiesce", resource: api.KindMachines, write: true, h: s.quiesce})
	s.handle(route{pattern: "POST " + item + "/unquiesce", resource: api.KindMachines, write: true, h: s.machineAction(s.st.Unquiesce)})
	// A bundle carries the machine's agent Secret: only roles that may read secrets export.
	s.handle(route{pattern: "GET " + item + "/export", resource: resSecrets, h: s.export})
	s.handle(route{pattern: "POST " + item + "/finalize-migration", resource: api.KindMachines, write: true, h: s.finalizeMigration})
	s.handle(route{pattern: "POST " + item + "/restore-migration", resource: api.KindMachines, write: true, h: s.machineAction(s.st.RestoreMigration)})
	s.handle(route{pattern: "POST " + item + "/activate", resource: api.KindMachines, write: true, h: s.machineAction(s.st.Activate)})
	// The ticket alone authorises an import: the source's worker holds no token of this region.
	s.handle(route{pattern: "POST " + p + "/" + api.KindMachines + "/import", public: true, h: s.importMachine})
	s.migrationUndoRoutes()
}

// machineAction serves a POST that changes the machine at {key} and answers with it. A
// migration names itself in the query (?migration=, as a DELETE does): the store then
// refuses the step on a machine another migration holds (store.ForMigration), and one of an
// attempt older than one that acted on the machine (?attempt=, store.ForAttempt).
func (s *Server) machineAction(action func(ctx context.Context, by store.Principal, key string) (api.Machine, error)) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *call) error {
		ctx, err := stepContext(r)
		if err != nil {
			return err
		}
		m, err := action(ctx, c.by, r.PathValue("key"))
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, m)
		return nil
	}
}

func (s *Server) quiesce(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.QuiesceRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	return s.machineAction(func(ctx context.Context, by store.Principal, key string) (api.Machine, error) {
		return s.st.Quiesce(ctx, by, key, req.Migration)
	})(w, r, c)
}

func (s *Server) finalizeMigration(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.FinalizeRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	return s.machineAction(func(ctx context.Context, by store.Principal, key string) (api.Machine, error) {
		return s.st.FinalizeMigration(ctx, by, key, req.RedirectEndpoint)
	})(w, r, c)
}

func (s *Server) export(w http.ResponseWriter, r *http.Request, _ *call) error {
	if err := extendDeadlines(w, importTimeout); err != nil {
		return fmt.Errorf("extend the export's deadlines: %w", err)
	}
	b, err := s.st.Export(r.Context(), r.PathValue("key"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, b)
	return nil
}

// ticketSigner signs with the key the region cluster shares, as this region and public URL.
func (s *Server) ticketSigner(ctx context.Context) (*tickets.Signer, error) {
	if s.cfg.PublicURL == "" {
		return nil, errorf(http.StatusServiceUnavailable, "region %s has no public URL configured, which migrate tickets name", s.cfg.Name)
	}
	key, err := s.st.TicketKey(ctx)
	if err != nil {
		return nil, err
	}
	return tickets.NewSigner(key, s.cfg.Name, s.cfg.PublicURL)
}

func (s *Server) mintTicket(w http.ResponseWriter, r *http.Request, c *call) error {
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	var req api.TicketRequest
	if len(body) > 0 { // no body: the default TTL
		if err := decodeStrict(body, &req); err != nil {
			return err
		}
	}
	if req.TTL < 0 || req.TTL > tickets.MaxTTL {
		return errorf(http.StatusUnprocessableEntity, "ticket TTL %s is outside (0, %s]; 0 means %s", req.TTL, tickets.MaxTTL, tickets.DefaultTTL)
	}
	signer, err := s.ticketSigner(r.Context())
	if err != nil {
		return err
	}
	t, err := signer.Mint(time.Now(), req.TTL)
	if err != nil {
		return err
	}
	s.log.Info("migrate ticket minted", "ticket", t.ID, "by", c.by.User, "expires", t.Expires)
	writeJSON(w, http.StatusCreated, t)
	return nil
}

// verifyTicket checks an import ticket: 401 when it is missing, malformed, forged or expired,
// 403 when it was minted for another region or another use. Single use is the store's part.
func (s *Server) verifyTicket(ctx context.Context, token string) (store.TicketUse, error) {
	if token == "" {
		return store.TicketUse{}, errorf(http.StatusUnauthorized, "an import needs a migrate ticket in the %s header (POST %s/migrate-tickets on this region)", api.TicketHeader, api.PathPrefix)
	}
	claims, err := tickets.Parse(token)
	if err != nil {
		return store.TicketUse{}, errorf(http.StatusUnauthorized, "migrate ticket refused: %v", err)
	}
	if claims.Region != s.cfg.Name {
		return store.TicketUse{}, errorf(http.StatusForbidden, "migrate ticket refused: it was minted by region %q (%s), this is region %q", claims.Region, claims.Endpoint, s.cfg.Name)
	}
	signer, err := s.ticketSigner(ctx)
	if err != nil {
		return store.TicketUse{}, err
	}
	claims, err = signer.Verify(token, time.Now(), tickets.ScopeImport)
	switch {
	case errors.Is(err, tickets.ErrWrongRegion), errors.Is(err, tickets.ErrWrongScope):
		return store.TicketUse{}, errorf(http.StatusForbidden, "migrate ticket refused: %v", err)
	case err != nil:
		return store.TicketUse{}, errorf(http.StatusUnauthorized, "migrate ticket refused: %v", err)
	}
	return store.TicketUse{ID: claims.ID, Expires: time.Unix(claims.Expires, 0)}, nil
}

// importMachine verifies the ticket of the header before it reads the body: the route is
// public, and a bundle may be large.
func (s *Server) importMachine(w http.ResponseWriter, r *http.Request, _ *call) error {
	use, err := s.verifyTicket(r.Context(), r.Header.Get(api.TicketHeader))
	if err != nil {
		return err
	}
	attempt, err := attemptParam(r)
	if err != nil {
		return err
	}
	if err := extendDeadlines(w, importTimeout); err != nil {
		return fmt.Errorf("extend the import's deadlines: %w", err)
	}
	var req api.ImportRequest
	if err := decodeBodyUpTo(w, r, &req, maxImportBody); err != nil {
		return err
	}
	use.Migration, use.StartedBy = req.Migration, req.StartedBy
	m, err := s.st.Import(store.ForAttempt(r.Context(), attempt), use, req.Bundle, s.cfg.PublicURL)
	if err != nil {
		return err
	}
	s.log.Info("machine imported", "machine", m.Uuid, "name", m.Name, "ticket", use.ID, "jobs", len(req.Bundle.Jobs))
	writeJSON(w, http.StatusOK, m)
	return nil
}

// stepContext is the request's context marked with the migration and attempt its query names
// (?migration=, ?attempt=); a malformed attempt is 400.
func stepContext(r *http.Request) (context.Context, error) {
	attempt, err := attemptParam(r)
	if err != nil {
		return nil, err
	}
	return store.ForAttempt(store.ForMigration(r.Context(), r.URL.Query().Get(paramMigration)), attempt), nil
}

// attemptParam reads ?attempt= (api.ParamAttempt): zero when absent, 400 when malformed.
func attemptParam(r *http.Request) (api.Attempt, error) {
	q := r.URL.Query()
	if !q.Has(api.ParamAttempt) {
		return api.Attempt{}, nil
	}
	if len(q[api.ParamAttempt]) != 1 {
		return api.Attempt{}, errorf(http.StatusBadRequest, "?%s= names one attempt", api.ParamAttempt)
	}
	a, err := api.ParseAttempt(q.Get(api.ParamAttempt))
	if err != nil {
		return api.Attempt{}, errorf(http.StatusBadRequest, "?%s=: %v", api.ParamAttempt, err)
	}
	return a, nil
}
