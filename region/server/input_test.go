package server_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/region/api"
)

// maxBody is the documented request body limit, 1 MiB.
const maxBody = 1 << 20

// TestBadInput sends bad requests and checks the status, that the message names what is
// wrong, and that nothing changed (objects and the audit log read back the same).
func TestBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.create(api.KindMachines, map[string]any{"Name": "birdy", "HardwareAddrs": []string{"52:54:00:aa:bb:cc"}})
	item := "/api/v1/machines/" + m["Uuid"].(string)
	j := e.create(api.KindJobs, map[string]any{"Machine": m["Uuid"], "StartTime": time.Now().Format(time.RFC3339Nano)})
	logPath := "/api/v1/jobs/" + j["Uuid"].(string) + "/log"
	e.create(api.KindUsers, map[string]any{"Name": "bob", "Role": api.RoleOperator})
	e.create(api.KindPools, map[string]any{"Name": "gold"})
	e.create(api.KindMachines, map[string]any{"Name": "goldie", "Pool": "gold"})
	huge := `{"Name": "big", "Description": "` + strings.Repeat("x", maxBody) + `"}`

	cases := []struct {
		name, method, path string
		body               any
		code               int
		want               string // part of the message
	}{
		{"malformed", "POST", "/api/v1/machines", `{"Name": "a",`, 400, "malformed JSON"},
		{"syntax offset", "POST", "/api/v1/machines", `{"Name" "a"}`, 400, "offset 8"},
		{"wrong type", "POST", "/api/v1/machines", `{"Name": 5}`, 400, "field Name: expected string"},
		{"nested wrong type", "POST", "/api/v1/machines", `{"Name": "a", "Meta": {"k": 1}}`, 400, "field Meta"},
		{"unknown field", "POST", "/api/v1/machines", `{"Name": "a", "Colour": "red"}`, 400, `unknown field "Colour"`},
		{"trailing data", "POST", "/api/v1/machines", `{"Name": "a"} {"Name": "b"}`, 400, "unexpected data after the JSON value at offset 14"},
		{"empty body", "POST", "/api/v1/machines", ``, 400, "empty request body"},
		{"oversized", "POST", "/api/v1/machines", huge, 413, "larger than 1048576 bytes"},
		{"bad MAC", "POST", "/api/v1/machines", `{"Name": "a", "HardwareAddrs": ["zz:zz"]}`, 422, "zz:zz"},
		{"duplicate name", "POST", "/api/v1/machines", `{"Name": "birdy"}`, 409, "birdy"},
		{"duplicate MAC", "POST", "/api/v1/machines", `{"Name": "other", "HardwareAddrs": ["52:54:00:AA:BB:CC"]}`, 409, "52:54:00:aa:bb:cc"},
		{"missing pool", "POST", "/api/v1/machines", `{"Name": "a", "Pool": "platinum"}`, 422, "platinum"},
		{"PUT wrong type", "PUT", item, `{"Name": "birdy", "Runnable": "yes"}`, 400, "field Runnable"},
		{"PUT unknown field", "PUT", item, `{"Name": "birdy", "Colour": "red"}`, 400, `unknown field "Colour"`},
		{"PUT trailing data", "PUT", item, `{"Name": "birdy"}]`, 400, "unexpected data"},
		{"PUT other Uuid", "PUT", item, `{"Name": "birdy", "Uuid": "` + j["Uuid"].(string) + `"}`, 422, "identity cannot change"},
		{"PUT unknown key", "PUT", "/api/v1/machines/Name:nobody", `{"Name": "nobody"}`, 404, "nobody"},
		{"PATCH not an object", "PATCH", item, `["Name"]`, 400, "merge patch must be a JSON object"},
		{"PATCH null", "PATCH", item, `null`, 400, "merge patch must be a JSON object"},
		{"PATCH malformed", "PATCH", item, `{"Name": }`, 400, "malformed JSON"},
		{"PATCH unknown field", "PATCH", item, `{"Colour": "red"}`, 400, `unknown field "Colour"`},
		{"PATCH wrong type", "PATCH", item, `{"CurrentTask": "two"}`, 400, "field CurrentTask"},
		{"PATCH bad MAC", "PATCH", item, `{"HardwareAddrs": ["nope"]}`, 422, "nope"},
		{"PATCH unknown key", "PATCH", "/api/v1/machines/Name:nobody", `{"Stage": "x"}`, 404, "nobody"},
		{"GET unknown key", "GET", "/api/v1/machines/" + api.NilUUID, nil, 404, api.NilUUID},
		{"GET unknown field key", "GET", "/api/v1/machines/Colour:red", nil, 422, "Colour"},
		{"unknown filter", "GET", "/api/v1/machines?Colour=red", nil, 422, "Colour"},
		{"repeated filter", "GET", "/api/v1/machines?Name=a&Name=b", nil, 400, "Name is given 2 times"},
		{"negative limit", "GET", "/api/v1/machines?limit=-1", nil, 400, "limit"},
		{"bad offset", "GET", "/api/v1/machines?offset=x", nil, 400, "offset"},
		{"bad force", "DELETE", item + "?force=maybe", nil, 400, "force"},
		{"delete unknown", "DELETE", "/api/v1/pools/nothere", nil, 404, "nothere"},
		{"delete pool in use", "DELETE", "/api/v1/pools/gold", nil, 409, "goldie"},
		{"log not UTF-8", "PUT", logPath, []byte{0xff, 0xfe}, 400, "UTF-8"},
		{"log NUL", "PUT", logPath, "a\x00b", 400, "NUL byte at offset 1"},
		{"log oversized", "PUT", logPath, strings.Repeat("x", maxBody+1), 413, "larger than"},
		{"token negative TTL", "POST", "/api/v1/users/bob/token", `{"TTL": -1}`, 422, "negative"},
		{"token wrong type", "POST", "/api/v1/users/bob/token", `{"TTL": "1h"}`, 400, "field TTL"},
		{"token unknown field", "POST", "/api/v1/users/bob/token", `{"Scope": "all"}`, 400, `unknown field "Scope"`},
		{"token above user role", "POST", "/api/v1/users/bob/token", `{"Role": "admin"}`, 422, "admin"},
		{"token unknown role", "POST", "/api/v1/users/bob/token", `{"Role": "root"}`, 422, "root"},
	}
	snapshot := func() []byte {
		var b bytes.Buffer
		for _, path := range []string{"/api/v1/machines", "/api/v1/jobs", "/api/v1/pools", "/api/v1/users", "/api/v1/events", logPath} {
			b.Write(e.mustDo(api.RoleAdmin, http.MethodGet, path, nil, http.StatusOK).body)
		}
		return b.Bytes()
	}
	before := snapshot()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msg := e.do(api.RoleAdmin, c.method, c.path, c.body).apiError(t, c.code)
			if !strings.Contains(msg, c.want) {
				t.Errorf("message %q does not contain %q", msg, c.want)
			}
			if after := snapshot(); !bytes.Equal(after, before) {
				t.Errorf("state changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// TestMuxErrorsAreJSON checks that unknown routes and methods get JSON errors too.
func TestMuxErrorsAreJSON(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if msg := e.do(api.RoleAdmin, http.MethodGet, "/api/v1/widgets", nil).apiError(t, http.StatusNotFound); !strings.Contains(msg, "/api/v1/widgets") {
		t.Errorf("404 message %q does not name the path", msg)
	}
	e.do("", http.MethodGet, "/nope", nil).apiError(t, http.StatusNotFound)
	r := e.do(api.RoleAdmin, http.MethodDelete, "/api/v1/machines", nil)
	r.apiError(t, http.StatusMethodNotAllowed)
	if allow := r.header.Get("Allow"); !strings.Contains(allow, "GET") || !strings.Contains(allow, "POST") {
		t.Errorf("Allow = %q, want GET and POST", allow)
	}
	e.do(api.RoleAdmin, http.MethodPost, "/api/v1/info", nil).apiError(t, http.StatusMethodNotAllowed)
}
