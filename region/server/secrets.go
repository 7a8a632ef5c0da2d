package server

import (
	"net/http"

	"github.com/ironflow/ironflow/region/api"
)

// resSecrets is machine secrets: admin and operator only, even for reads.
const resSecrets = "secrets"

// secretRoutes registers machine secrets and ad-hoc scripts (region/api/secrets.go). Secret
// names may contain "/" (e.g. "migrate-machine/esxi-ssh-priv-key"), hence {name...}.
func (s *Server) secretRoutes() {
	item := api.PathPrefix + "/" + api.KindMachines + "/{key}"
	secret := item + "/secrets/{name...}"
	// Writes wait while the machine's rack is paused for a transfer (queue.go).
	s.handle(route{pattern: "PUT " + secret, resource: resSecrets, write: true, queue: api.KindMachines, h: s.putSecret})
	s.handle(route{pattern: "GET " + secret, resource: resSecrets, h: s.showSecret})
	s.handle(route{pattern: "DELETE " + secret, resource: resSecrets, write: true, queue: api.KindMachines, h: s.deleteSecret})
	s.handle(route{pattern: "POST " + item + "/run", resource: api.KindMachines, write: true, queue: api.KindMachines, h: s.runAdhoc})
}

func (s *Server) putSecret(w http.ResponseWriter, r *http.Request, c *call) error {
	var sec api.Secret
	if err := decodeBody(w, r, &sec); err != nil {
		return err
	}
	name := r.PathValue("name")
	switch sec.Name {
	case "":
		sec.Name = name
	case name:
	default:
		return errorf(http.StatusUnprocessableEntity, "secret Name %q differs from the name %q in the path", sec.Name, name)
	}
	if err := s.st.SetSecret(r.Context(), c.by, r.PathValue("key"), sec); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) showSecret(w http.ResponseWriter, r *http.Request, _ *call) error {
	sec, err := s.st.Secret(r.Context(), r.PathValue("key"), r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sec)
	return nil
}

func (s *Server) deleteSecret(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := s.st.DeleteSecret(r.Context(), c.by, r.PathValue("key"), r.PathValue("name")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) runAdhoc(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.AdhocRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	job, err := s.st.RunAdhoc(r.Context(), c.by, r.PathValue("key"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, job)
	return nil
}
