package server

import (
	"net/http"
	"strings"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

// resEnlist is POST /api/v1/enlist: racks forward their booting machines' reports with their
// own token; operators and admins may enlist directly.
const resEnlist = "enlist"

func (s *Server) enlistRoutes() {
	s.handle(route{pattern: "POST " + api.PathPrefix + "/enlist", resource: resEnlist, write: true, h: s.enlist})
}

// enlist answers 201 when the report created a machine, 200 when it matched one, 409 when
// it was refused. A rack's report of iPXE facts names that rack, whatever the body says.
func (s *Server) enlist(w http.ResponseWriter, r *http.Request, c *call) error {
	var e api.Enlistment
	if err := decodeBody(w, r, &e); err != nil {
		return err
	}
	if rack, ok := strings.CutPrefix(c.by.User, store.RackUser("")); ok && c.by.Role == api.RoleRack && e.Boot != nil {
		e.Boot.Rack = rack
	}
	res, err := s.st.Enlist(r.Context(), c.by, e)
	if err != nil {
		s.log.Warn("enlistment refused", "by", c.by.User, "error", err)
		return err
	}
	code := http.StatusOK
	if res.Created {
		code = http.StatusCreated
	}
	s.log.Info("machine enlisted", "machine", res.Machine, "name", res.Name, "created", res.Created, "by", c.by.User)
	writeJSON(w, code, res)
	return nil
}
