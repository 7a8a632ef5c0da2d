package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/region/api"
)

// TestMergePatchRFC7386 runs the examples of RFC 7386 appendix A.
func TestMergePatchRFC7386(t *testing.T) {
	cases := []struct{ target, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`["a","b"]`, `["c","d"]`, `["c","d"]`},
		{`{"a":"b"}`, `["c"]`, `["c"]`},
		{`{"a":"foo"}`, `null`, `null`},
		{`{"a":"foo"}`, `"bar"`, `"bar"`},
		{`{"e":null}`, `{"a":1}`, `{"a":1,"e":null}`},
		{`[1,2]`, `{"a":"b","c":null}`, `{"a":"b"}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
		{`{"n":12345678901234567890}`, `{"m":1}`, `{"m":1,"n":12345678901234567890}`},
	}
	for _, c := range cases {
		var target, patch any
		if err := decodeStrict([]byte(c.target), &target); err != nil {
			t.Fatal(err)
		}
		if err := decodeStrict([]byte(c.patch), &patch); err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(mergePatch(target, patch))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != c.want {
			t.Errorf("MergePatch(%s, %s) = %s, want %s", c.target, c.patch, got, c.want)
		}
	}
}

func TestDecodeStrictErrors(t *testing.T) {
	cases := []struct{ name, body, want string }{
		{"empty", ``, "empty request body"},
		{"truncated", `{"Name": "a",`, "ends in the middle"},
		{"syntax", `{"Name" "a"}`, "malformed JSON at offset 8"},
		{"wrong type", `{"Name": 5}`, "field Name: expected string, got JSON number"},
		{"nested wrong type", `{"Fingerprint": {"MemoryIds": "x"}}`, "field Fingerprint.MemoryIds: expected []string, got JSON string"},
		{"unknown field", `{"Name": "a", "Bogus": 1}`, `unknown field "Bogus"`},
		{"second value", `{"Name": "a"} {"Name": "b"}`, "unexpected data after the JSON value at offset 14"},
		{"trailing garbage", `{"Name": "a"} x`, "unexpected data after the JSON value"},
		{"not an object", `[1]`, "expected api.Machine, got JSON array"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var m api.Machine
			err := decodeStrict([]byte(c.body), &m)
			if err == nil {
				t.Fatalf("decoded %q without error", c.body)
			}
			if code := statusOf(err); code != http.StatusBadRequest {
				t.Errorf("status %d, want 400", code)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not contain %q", err, c.want)
			}
		})
	}
	var j api.Job
	if err := decodeStrict([]byte(`{"StartTime": "yesterday"}`), &j); err == nil || !strings.Contains(err.Error(), "yesterday") {
		t.Errorf("bad time: error %v, want one quoting the value", err)
	}
	if err := decodeStrict([]byte(" {\"Name\": \"a\"} \n"), &api.Machine{}); err != nil {
		t.Errorf("surrounding whitespace refused: %v", err)
	}
}

// TestPermissionTable checks the documented role model against the table.
func TestPermissionTable(t *testing.T) {
	resources := []string{api.KindMachines, api.KindJobs, api.KindProfiles, api.KindPools, api.KindPods,
		api.KindFabrics, api.KindVLANs, api.KindSubnets, api.KindLeases, api.KindRacks, api.KindUsers,
		resEvents, resJobLogs}
	want := func(role, res string, write bool) access {
		switch role {
		case api.RoleAdmin:
			return granted
		case api.RoleOperator:
			return map[bool]access{true: denied, false: granted}[res == api.KindUsers]
		case api.RoleReadonly:
			return map[bool]access{true: granted, false: denied}[!write && res != api.KindUsers]
		case api.RoleRack: // reads like readonly; writes only through the rack API
			return map[bool]access{true: granted, false: denied}[!write && res != api.KindUsers]
		case api.RoleMachine:
			if res == resJobLogs || !write && (res == api.KindMachines || res == api.KindJobs) {
				return ownOnly
			}
		}
		return denied
	}
	for _, role := range append(api.Roles, "nobody") {
		for _, res := range resources {
			for _, write := range []bool{false, true} {
				if got, w := authorize(role, res, write), want(role, res, write); got != w {
					t.Errorf("authorize(%s, %s, write=%v) = %d, want %d", role, res, write, got, w)
				}
			}
		}
	}
}
