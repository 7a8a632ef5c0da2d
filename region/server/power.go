package server

import (
	"net/http"

	"github.com/ironflow/ironflow/region/api"
)

// resPowerCredential is a machine's BMC credential as its rack fetches it: the machine's own
// rack (checked by the store), operators and admins; never readonly or machine tokens.
const resPowerCredential = "powercredential"

// powerRoutes registers machine power (region/api/power.go).
func (s *Server) powerRoutes() {
	p := api.PathPrefix
	// Setting the driver writes the BMC password: a secret's write (admin, operator).
	s.handle(route{pattern: "PUT " + p + "/" + api.KindMachines + "/{key}/power", resource: resSecrets, write: true, queue: api.KindMachines, h: s.setPower})
	rackMachine := p + "/" + api.KindRacks + "/{uuid}/machines/{machine}"
	s.handle(route{pattern: "GET " + rackMachine + "/power-credential", resource: resPowerCredential, h: s.powerCredential})
	s.handle(route{pattern: "PUT " + rackMachine + "/power", resource: resRackAPI, write: true, h: s.reportPower})
	s.handle(route{pattern: "PUT " + rackMachine + "/commissioning", resource: resRackAPI, write: true, h: s.reportCommissioning})
}

func (s *Server) setPower(w http.ResponseWriter, r *http.Request, c *call) error {
	var cfg api.PowerConfig
	if err := decodeBody(w, r, &cfg); err != nil {
		return err
	}
	m, err := s.st.SetPower(r.Context(), c.by, r.PathValue("key"), cfg)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, m)
	return nil
}

func (s *Server) powerCredential(w http.ResponseWriter, r *http.Request, c *call) error {
	id, err := ownRack(r, c)
	if err != nil {
		return err
	}
	cred, err := s.st.PowerCredential(r.Context(), id, r.PathValue("machine"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, cred)
	return nil
}

func (s *Server) reportPower(w http.ResponseWriter, r *http.Request, c *call) error {
	id, err := ownRack(r, c)
	if err != nil {
		return err
	}
	var rep api.PowerReport
	if err := decodeBody(w, r, &rep); err != nil {
		return err
	}
	m, err := s.st.ReportPower(r.Context(), c.by, id, r.PathValue("machine"), rep)
	if err != nil {
		return err
	}
	redactions[api.KindMachines](&m)
	writeJSON(w, http.StatusOK, m)
	return nil
}

func (s *Server) reportCommissioning(w http.ResponseWriter, r *http.Request, c *call) error {
	id, err := ownRack(r, c)
	if err != nil {
		return err
	}
	var rep api.CommissionReport
	if err := decodeBody(w, r, &rep); err != nil {
		return err
	}
	m, err := s.st.SetCommissioning(r.Context(), c.by, id, r.PathValue("machine"), rep)
	if err != nil {
		return err
	}
	redactions[api.KindMachines](&m)
	writeJSON(w, http.StatusOK, m)
	return nil
}
