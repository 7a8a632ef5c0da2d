package server

import (
	"context"
	"net/http"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/ironflow/ironflow/region/api"
)

// endpointMaxAge is how recently a region process must have heartbeaten to be listed in Info.
const endpointMaxAge = 30 * time.Second

// pingTimeout bounds the database check of /healthz.
const pingTimeout = 2 * time.Second

func (s *Server) healthz(w http.ResponseWriter, r *http.Request, _ *call) error {
	ctx, cancel := context.WithTimeout(r.Context(), pingTimeout)
	defer cancel()
	if err := s.st.Ping(ctx); err != nil {
		return errorf(http.StatusServiceUnavailable, "database unavailable: %v", err)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte("ok\n"))
	return nil
}

func (s *Server) info(w http.ResponseWriter, r *http.Request, _ *call) error {
	info, err := s.regionInfo(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, info)
	return nil
}

// regionInfo describes this region and the processes of its cluster.
func (s *Server) regionInfo(ctx context.Context) (api.Info, error) {
	id, err := s.identity(ctx)
	if err != nil {
		return api.Info{}, err
	}
	endpoints, err := s.st.Endpoints(ctx, endpointMaxAge)
	if err != nil {
		return api.Info{}, err
	}
	if s.cfg.PublicURL != "" && !slices.Contains(endpoints, s.cfg.PublicURL) {
		endpoints = append(endpoints, s.cfg.PublicURL)
		slices.Sort(endpoints)
	}
	if endpoints == nil {
		endpoints = []string{}
	}
	return api.Info{
		Name:      s.cfg.Name,
		Uuid:      id,
		URL:       s.cfg.PublicURL,
		Endpoints: endpoints,
		Version:   s.cfg.Version,
	}, nil
}

// identity returns the region's UUID. It never changes once the database has one, so the
// first answer is kept.
func (s *Server) identity(ctx context.Context) (string, error) {
	s.idMu.Lock()
	defer s.idMu.Unlock()
	if s.uuid != "" {
		return s.uuid, nil
	}
	id, err := s.st.Identity(ctx, s.cfg.Name)
	if err != nil {
		return "", err
	}
	s.uuid = id
	return id, nil
}

func (s *Server) events(w http.ResponseWriter, r *http.Request, _ *call) error {
	opts, err := listOptions(r)
	if err != nil {
		return err
	}
	events, err := s.st.Events(r.Context(), opts.probe())
	if err != nil {
		return err
	}
	opts.page(w, &events)
	writeList(w, &events)
	return nil
}

func (s *Server) mintToken(w http.ResponseWriter, r *http.Request, c *call) error {
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	var req api.TokenRequest
	if len(body) > 0 { // no body: the user's role, no expiry
		if err := decodeStrict(body, &req); err != nil {
			return err
		}
	}
	if req.TTL < 0 {
		return errorf(http.StatusUnprocessableEntity, "TTL %v is negative", req.TTL)
	}
	tok, err := s.st.CreateToken(r.Context(), c.by, r.PathValue("name"), req.Role, req.TTL)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, tok)
	return nil
}

// jobForLog finds the job of a log call and refuses other machines' jobs to a machine token.
func (s *Server) jobForLog(r *http.Request, c *call) (string, error) {
	key := r.PathValue("key")
	if !c.own {
		return key, nil
	}
	jobs := kindNamed(api.KindJobs)
	job := jobs.newObj()
	if err := s.st.Get(r.Context(), jobs.name, key, job); err != nil {
		return "", err
	}
	return key, checkOwner(c, jobs, job)
}

func (s *Server) showJobLog(w http.ResponseWriter, r *http.Request, c *call) error {
	key, err := s.jobForLog(r, c)
	if err != nil {
		return err
	}
	text, err := s.st.JobLog(r.Context(), key)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte(text))
	return nil
}

func (s *Server) appendJobLog(w http.ResponseWriter, r *http.Request, c *call) error {
	key, err := s.jobForLog(r, c)
	if err != nil {
		return err
	}
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	// PostgreSQL text holds UTF-8 without NUL bytes.
	if !utf8.Valid(body) {
		return errorf(http.StatusBadRequest, "job log text is not valid UTF-8")
	}
	if i := slices.Index(body, 0); i >= 0 {
		return errorf(http.StatusBadRequest, "job log text contains a NUL byte at offset %d", i)
	}
	if err := s.st.AppendJobLog(r.Context(), c.by, key, string(body)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
