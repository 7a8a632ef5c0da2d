package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

// The machine agent API (region/api/agent.go).

const (
	// maxPollWait bounds a next-job long poll.
	maxPollWait = 60 * time.Second
	// jobPollInterval is how often a long poll looks for a new job. Polling keeps no
	// connection per waiting agent; the query is an index lookup.
	jobPollInterval = 500 * time.Millisecond
	// pollSlack is the time a long poll gets past its wait to answer.
	pollSlack = 10 * time.Second
	// suggestedPollWait is the long-poll wait check-ins suggest to agents.
	suggestedPollWait = "30s"
)

func (s *Server) agentRoutes() {
	p := api.PathPrefix + "/agent/{uuid}"
	// Agents authenticate with their machine's secret, not with a token (agentHandler).
	s.handle(route{pattern: "POST " + p + "/checkin", public: true, h: s.agent(s.agentCheckin)})
	s.handle(route{pattern: "GET " + p + "/next-job", public: true, h: s.agent(s.nextJob)})
	s.handle(route{pattern: "PUT " + p + "/jobs/{job}/log", public: true, h: s.agent(s.agentLog)})
	s.handle(route{pattern: "POST " + p + "/jobs/{job}/exit", public: true, h: s.agent(s.agentExit)})
}

// agentHandler serves an agent call of the authenticated machine m.
type agentHandler func(w http.ResponseWriter, r *http.Request, m *api.Machine) error

// agent authenticates the agent as its machine and answers every call for a migrated stub
// with a redirect to the same path on the destination.
func (s *Server) agent(h agentHandler) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, _ *call) error {
		m, err := s.agentMachine(r)
		if err != nil {
			return err
		}
		if to := m.Meta[api.MetaRedirectEndpoint]; to != "" {
			writeMoved(w, r, m.Uuid, to)
			return nil
		}
		err = h(w, r, m)
		var moved *store.MovedError // the machine was finalized during the call
		if errors.As(err, &moved) {
			writeMoved(w, r, moved.Machine, moved.Endpoint)
			return nil
		}
		return err
	}
}

func writeMoved(w http.ResponseWriter, r *http.Request, machine, endpoint string) {
	loc := strings.TrimSuffix(endpoint, "/") + r.URL.EscapedPath()
	if r.URL.RawQuery != "" {
		loc += "?" + r.URL.RawQuery
	}
	w.Header().Set("Location", loc)
	writeJSON(w, http.StatusTemporaryRedirect, api.Redirect{Endpoint: endpoint, Machine: machine})
}

// agentMachine checks "Authorization: Bearer machine:<uuid>:<secret>" against the machine's
// Secret (401) and that the machine calls for itself (403).
func (s *Server) agentMachine(r *http.Request) (*api.Machine, error) {
	token, err := bearer(r)
	if err != nil {
		return nil, err
	}
	rest, ok := strings.CutPrefix(token, api.RoleMachine+":")
	id, secret, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || id == "" || secret == "" {
		return nil, errorf(http.StatusUnauthorized, "agent credentials must be \"Bearer machine:<machine-uuid>:<secret>\"")
	}
	refused := errorf(http.StatusUnauthorized, "unknown machine or wrong secret")
	if _, err := uuid.Parse(id); err != nil {
		return nil, refused
	}
	var m api.Machine
	err = s.st.Get(r.Context(), api.KindMachines, "Uuid:"+id, &m)
	if errors.Is(err, store.ErrNotFound) {
		return nil, refused
	}
	if err != nil {
		return nil, err
	}
	// Hashes, so the comparison takes the same time whatever the lengths.
	given, want := sha256.Sum256([]byte(secret)), sha256.Sum256([]byte(m.Secret))
	if m.Secret == "" || subtle.ConstantTimeCompare(given[:], want[:]) != 1 {
		return nil, refused
	}
	path, err := uuid.Parse(r.PathValue("uuid"))
	if err != nil || path.String() != m.Uuid {
		return nil, errorf(http.StatusForbidden, "machine %s may only use its own agent API, not that of %q", m.Uuid, r.PathValue("uuid"))
	}
	return &m, nil
}

func (s *Server) agentCheckin(w http.ResponseWriter, r *http.Request, m *api.Machine) error {
	var in api.AgentCheckin
	if err := decodeBody(w, r, &in); err != nil {
		return err
	}
	if _, err := s.st.AgentCheckin(r.Context(), m.Uuid, in, time.Now()); err != nil {
		return err
	}
	info, err := s.regionInfo(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.AgentConfig{Machine: m.Uuid, Endpoints: info.Endpoints, PollWait: suggestedPollWait})
	return nil
}

// nextJob hands out the machine's next job, waiting up to the wait parameter for one to be
// created; 204 when none came.
func (s *Server) nextJob(w http.ResponseWriter, r *http.Request, m *api.Machine) error {
	wait, err := waitParam(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	deadline := time.Now().Add(wait)
	if err := extendDeadlines(w, wait+pollSlack); err != nil {
		return fmt.Errorf("extend the long poll's deadlines: %w", err)
	}
	for {
		job, err := s.st.NextJob(ctx, m.Uuid, time.Now())
		if err != nil {
			return err
		}
		if job != nil {
			writeJSON(w, http.StatusOK, job)
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			w.WriteHeader(http.StatusNoContent)
			return nil
		}
		t := time.NewTimer(min(left, jobPollInterval))
		select {
		case <-ctx.Done(): // the agent went away, or the server is shutting down
			t.Stop()
			w.WriteHeader(http.StatusNoContent)
			return nil
		case <-t.C:
		}
	}
}

func waitParam(r *http.Request) (time.Duration, error) {
	v := r.URL.Query().Get("wait")
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > maxPollWait {
		return 0, errorf(http.StatusBadRequest, "query parameter wait=%q is not a duration between 0s and %s", v, maxPollWait)
	}
	return d, nil
}

// agentLog appends to the log of one of the machine's jobs, as PUT /jobs/{key}/log does for
// a machine token.
func (s *Server) agentLog(w http.ResponseWriter, r *http.Request, m *api.Machine) error {
	r.SetPathValue("key", r.PathValue("job"))
	return s.appendJobLog(w, r, &call{by: store.AgentPrincipal(m.Uuid), own: true})
}

func (s *Server) agentExit(w http.ResponseWriter, r *http.Request, m *api.Machine) error {
	var exit api.AgentJobExit
	if err := decodeBody(w, r, &exit); err != nil {
		return err
	}
	job, err := s.st.FinishJob(r.Context(), m.Uuid, r.PathValue("job"), exit, time.Now())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, job)
	return nil
}
