package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/region/api"
)

// A power driver is checked before it is stored; its BMC credential reaches the machine's own
// rack only (and operators), never another rack or a readonly token; a machine write keeps the
// stored Power; a power grant is refused while a migration holds the machine.
func TestPowerCredentialsAndRefusals(t *testing.T) {
	e := newEnv(t)
	a := e.register(api.RackRegistration{Name: "rack-a"})
	b := e.register(api.RackRegistration{Name: "rack-b"})
	m := e.create(api.KindMachines, map[string]any{"Name": "metal-1", "Rack": a.Rack.Uuid})["Uuid"].(string)
	set := "/api/v1/machines/" + m + "/power"
	for _, bad := range []api.PowerConfig{
		{Type: "redfish", Address: "10.0.0.9", User: "u", Password: "p"},
		{Type: api.PowerTypeIPMI, Address: "10.0.0.9:623:1", User: "u", Password: "p"},
		{Type: api.PowerTypeIPMI, Address: "bmc_1!", User: "u", Password: "p"},
		{Type: api.PowerTypeIPMI, Address: "10.0.0.9", User: "u"},
		{Type: api.PowerTypeManual, Address: "10.0.0.9"},
	} {
		e.do(api.RoleOperator, http.MethodPut, set, bad).apiError(t, http.StatusUnprocessableEntity)
	}
	e.do(api.RoleReadonly, http.MethodPut, set, api.PowerConfig{Type: api.PowerTypeManual}).apiError(t, http.StatusForbidden)
	e.mustDo(api.RoleOperator, http.MethodPut, set, api.PowerConfig{Type: api.PowerTypeIPMI, Address: "10.0.0.9", User: "u", Password: "bmc-pw"}, http.StatusOK)

	cred := "/api/v1/racks/" + a.Rack.Uuid + "/machines/" + m + "/power-credential"
	var c api.PowerCredential
	decodeJSON(t, doRequest(t, a.Token, http.MethodGet, e.base+cred, nil), &c)
	if c.Password != "bmc-pw" || c.Address != "10.0.0.9:623" {
		t.Errorf("own rack's credential %+v", c)
	}
	// Rack b names its own rack in the path: the machine is not its.
	other := "/api/v1/racks/" + b.Rack.Uuid + "/machines/" + m + "/power-credential"
	if msg := doRequest(t, b.Token, http.MethodGet, e.base+other, nil).apiError(t, http.StatusForbidden); strings.Contains(msg, "bmc-pw") {
		t.Errorf("refusal shows the password: %s", msg)
	}
	doRequest(t, b.Token, http.MethodGet, e.base+cred, nil).apiError(t, http.StatusForbidden)
	e.do(api.RoleReadonly, http.MethodGet, cred, nil).apiError(t, http.StatusForbidden)

	// A machine PUT cannot rewrite Power.
	got := e.mustDo(api.RoleOperator, http.MethodGet, "/api/v1/machines/"+m, nil, http.StatusOK).json(t)
	got["Power"] = map[string]any{"Type": "manual", "State": "on"}
	e.mustDo(api.RoleOperator, http.MethodPut, "/api/v1/machines/"+m, got, http.StatusOK)
	after := e.mustDo(api.RoleReadonly, http.MethodGet, "/api/v1/machines/"+m, nil, http.StatusOK).json(t)
	if p := after["Power"].(map[string]any); p["Type"] != "ipmi" || p["State"] != "unknown" {
		t.Errorf("Power after a machine PUT: %v", p)
	}

	// A migration holds the machine: no power grant.
	got = e.mustDo(api.RoleOperator, http.MethodGet, "/api/v1/machines/"+m, nil, http.StatusOK).json(t)
	got["Meta"] = map[string]any{api.MetaMigrating: "migrate-machine/" + m}
	e.mustDo(api.RoleAdmin, http.MethodPut, "/api/v1/machines/"+m, got, http.StatusOK)
	msg := e.do(api.RoleOperator, http.MethodPost, "/api/v1/migrate-grants", api.GrantRequest{Kind: api.GrantPower, Key: m}).apiError(t, http.StatusConflict)
	if !strings.Contains(msg, "held by migration migrate-machine/"+m) {
		t.Errorf("power grant on a held machine: %s", msg)
	}
}
