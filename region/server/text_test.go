package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/region/api"
)

// TestNULAndInvalidUTF8Are400: NUL and invalid UTF-8 anywhere a client sends text (body
// fields and their names, filters, keys, query parameters, the agent's check-in) are
// answered 400 naming where, and change nothing.
func TestNULAndInvalidUTF8Are400(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.create(api.KindMachines, api.Machine{Name: "m1", Secret: "agent-secret", HardwareAddrs: []string{"52:54:00:00:00:01"}})
	id := m["Uuid"].(string)
	machineBody := func(inner string) string { return `{"Name":"m2",` + inner + `}` }
	cases := []struct {
		name, method, path, body, want string
	}{
		{"Description NUL", http.MethodPost, "/api/v1/machines", machineBody(`"Description":"a\u0000b"`), "field Description contains a NUL"},
		{"Description invalid UTF-8", http.MethodPost, "/api/v1/machines", machineBody("\"Description\":\"a\xffb\""), "field Description is not valid UTF-8"},
		{"Meta value NUL", http.MethodPost, "/api/v1/machines", machineBody(`"Meta":{"k":"\u0000"}`), "field Meta.k contains a NUL"},
		{"Meta key NUL", http.MethodPost, "/api/v1/machines", machineBody(`"Meta":{"a\u0000":"v"}`), "a field name in Meta contains a NUL"},
		{"Params key NUL", http.MethodPost, "/api/v1/machines", machineBody(`"Params":{"x/\u0000":1}`), "a field name in Params contains a NUL"},
		{"Params nested value", http.MethodPost, "/api/v1/machines", machineBody(`"Params":{"x/y":[1,{"z":"\u0000"}]}`), `field Params["x/y"][1].z contains a NUL`},
		{"patch NUL", http.MethodPatch, "/api/v1/machines/" + id, `{"Description":"\u0000"}`, "field Description contains a NUL"},
		{"filter value NUL", http.MethodGet, "/api/v1/machines?Description=a%00", "", `query parameter "Description" contains a NUL`},
		{"filter value invalid UTF-8", http.MethodGet, "/api/v1/machines?Description=a%ff", "", `query parameter "Description" is not valid UTF-8`},
		{"query name NUL", http.MethodGet, "/api/v1/events?a%00=1", "", "a query parameter name contains a NUL"},
		{"Name key NUL", http.MethodGet, "/api/v1/machines/Name:m1%00", "", "the request path contains a NUL"},
		{"Name key invalid UTF-8", http.MethodGet, "/api/v1/machines/Name:m1%ff", "", "the request path is not valid UTF-8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var body any
			if c.body != "" {
				body = c.body
			}
			msg := e.do(api.RoleAdmin, c.method, c.path, body).apiError(t, http.StatusBadRequest)
			if !strings.Contains(msg, c.want) {
				t.Errorf("error %q does not say %q", msg, c.want)
			}
		})
	}
	t.Run("agent Version NUL", func(t *testing.T) {
		r := doRequest(t, "machine:"+id+":agent-secret", http.MethodPost, e.base+"/api/v1/agent/"+id+"/checkin", `{"Version":"1\u0000"}`)
		if msg := r.apiError(t, http.StatusBadRequest); !strings.Contains(msg, "field Version contains a NUL") {
			t.Errorf("error %q", msg)
		}
	})
	if list := e.mustDo(api.RoleAdmin, http.MethodGet, "/api/v1/machines", nil, http.StatusOK).list(t); len(list) != 1 || list[0]["Description"] != "" {
		t.Errorf("refused requests changed the machines: %v", list)
	}
}
