package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/server"
)

// Who may call a route, one column per principal in principal order:
//
//	anonymous readonly operator admin own-rack other-rack machine-token own-agent other-agent rack-secret
//
// "." the call gets past authentication and authorization (the handler answers: 2xx, 400,
// 404, 409, …), "U" 401, "F" 403. Operators reach the rack API of every rack (as they may
// write its leases and pods through the generic routes); a rack only its own. A migration
// bundle's import is public: its credential is the ticket in the body (abuseBodies). Paths name machine A (agent routes), rack A (rack API
// routes, whose handlers confine a rack to its own) or an object that does not exist, and
// writes send a body that is not JSON, so that no call changes anything.
var abuseRoutes = map[string]string{
	"GET /healthz":       ". . . . . . . . . .",
	"GET /metrics":       ". . . . . . . . . .",
	"GET /api/v1/info":   ". . . . . . . . . .",
	"GET /api/v1/events": "U . . . . . F U U U",
	// Tokens are users' business: only an admin mints them.
	"POST /api/v1/users/{name}/token": "U F F . F F F U U U",
	"GET /api/v1/jobs/{key}/log":      "U . . . . . . U U U",
	"PUT /api/v1/jobs/{key}/log":      "U F . . F F . U U U",
	"POST /api/v1/dns-query":          "U . . . . . F U U U",
	// The racks' proxy settings: operators change them, racks read them in their config.
	"GET /api/v1/proxy": "U . . . . . F U U U",
	"PUT /api/v1/proxy": "U F . . F F F U U U",

	// The rack API: a rack reaches its own rack only; syslog only racks post.
	"GET /api/v1/racks/secret":                             "U F F . F F F U U U",
	"POST /api/v1/racks/register":                          "U F F . . . F U U .",
	"GET /api/v1/racks/{uuid}/config":                      "U . . . . F F U U U",
	"POST /api/v1/racks/{uuid}/heartbeat":                  "U F . . . F F U U U",
	"POST /api/v1/racks/{uuid}/leases":                     "U F . . . F F U U U",
	"PUT /api/v1/racks/{uuid}/pods/{pod}/facts":            "U F . . . F F U U U",
	"POST /api/v1/racks/{uuid}/pods/{pod}/vms":             "U F . . . F F U U U",
	"DELETE /api/v1/racks/{uuid}/pods/{pod}/vms/{machine}": "U F . . . F F U U U",
	// A machine's BMC credential: its own rack (the store checks the machine is the rack's),
	// operators and admins; never readonly.
	"GET /api/v1/racks/{uuid}/machines/{machine}/power-credential": "U F . . . F F U U U",
	"PUT /api/v1/racks/{uuid}/machines/{machine}/power":            "U F . . . F F U U U",
	// A commissioning step's outcome: the machine's own rack (the store checks it), as for power.
	"PUT /api/v1/racks/{uuid}/machines/{machine}/commissioning": "U F . . . F F U U U",
	"POST /api/v1/racks/{uuid}/syslog":                          "U F F F . F F U U U",
	"GET /api/v1/machines/{key}/logs":                           "U . . . . . F U U U",
	"POST /api/v1/enlist":                                       "U F . . . . F U U U",

	// Rack transfers: operators and admins; readonly reads; racks and machines never.
	"POST /api/v1/racks/{uuid}/pause":          "U F . . F F F U U U",
	"POST /api/v1/racks/{uuid}/unpause":        "U F . . F F F U U U",
	"GET /api/v1/racks/{uuid}/export":          "U . . . F F F U U U",
	"POST /api/v1/racks/import/check":          "U . . . F F F U U U",
	"POST /api/v1/racks/import":                "U F . . F F F U U U",
	"DELETE /api/v1/racks/{uuid}/import":       "U F . . F F F U U U",
	"POST /api/v1/racks/{uuid}/hand-over":      "U F . . F F F U U U",
	"GET /api/v1/racks/{uuid}/operations":      "U . . . F F F U U U",
	"GET /api/v1/racks/{uuid}/operations/{id}": "U . . . F F F U U U",
	"POST /api/v1/racks/{uuid}/operations":     "U F . . F F F U U U",
	// Only the move releases a queue: an admin token whose call carries X-Ironflow-Move.
	"POST /api/v1/racks/{uuid}/operations/release": "U F F F F F F U U U",
	"POST /api/v1/racks/{uuid}/recover":            "U F . . F F F U U U",

	// Machine migrations.
	"POST /api/v1/migrate-tickets":                       "U F . . F F F U U U",
	"POST /api/v1/machines/{key}/quiesce":                "U F . . F F F U U U",
	"POST /api/v1/machines/{key}/unquiesce":              "U F . . F F F U U U",
	"GET /api/v1/machines/{key}/export":                  "U F . . F F F U U U",
	"POST /api/v1/machines/{key}/finalize-migration":     "U F . . F F F U U U",
	"POST /api/v1/machines/{key}/restore-migration":      "U F . . F F F U U U",
	"POST /api/v1/machines/{key}/activate":               "U F . . F F F U U U",
	"POST /api/v1/machines/import":                       "U U U U U U U U U U",
	"POST /api/v1/machines/{key}/redirect-copy":          "U F . . F F F U U U",
	"POST /api/v1/machines/{key}/compensation-decisions": "U F . . F F F U U U",
	"POST /api/v1/move-controls":                         "U F . . F F F U U U",
	"POST /api/v1/migrate-grants":                        "U F . . F F F U U U",
	"POST /api/v1/migrate-grants/verify":                 "U . . . . . F U U U",
	"DELETE /api/v1/migrate-grants/{id}":                 "U F . . F F F U U U",
	"GET /api/v1/whoami":                                 "U . . . . . F U U U",

	// The agent API: the machine's own secret, on its own path.
	"POST /api/v1/agent/{uuid}/checkin":         "U U U U U U U . F U",
	"GET /api/v1/agent/{uuid}/next-job":         "U U U U U U U . F U",
	"PUT /api/v1/agent/{uuid}/jobs/{job}/log":   "U U U U U U U . F U",
	"POST /api/v1/agent/{uuid}/jobs/{job}/exit": "U U U U U U U . F U",

	// A machine's secrets and ad-hoc jobs.
	"PUT /api/v1/machines/{key}/secrets/{name...}":    "U F . . F F F U U U",
	"GET /api/v1/machines/{key}/secrets/{name...}":    "U F . . F F F U U U",
	"DELETE /api/v1/machines/{key}/secrets/{name...}": "U F . . F F F U U U",
	// Setting a power driver writes the BMC password: a secret's write.
	"PUT /api/v1/machines/{key}/power": "U F . . F F F U U U",
	"POST /api/v1/machines/{key}/run":  "U F . . F F F U U U",

	// OS images: every role but a machine reads the metadata, only admins write (as MAAS
	// lets only admins manage images), only racks and admins read the bytes.
	"GET /api/v1/images":             "U . . . . . F U U U",
	"GET /api/v1/images/{name}":      "U . . . . . F U U U",
	"PUT /api/v1/images/{name}":      "U F F . F F F U U U",
	"DELETE /api/v1/images/{name}":   "U F F . F F F U U U",
	"GET /api/v1/images/{name}/data": "U F F . . . F U U U",
}

// abuseKinds states who may list (GET of the collection), show (GET of an item) and write
// (POST, PUT, PATCH, DELETE) each kind through its generic routes, in the columns of
// abuseRoutes. A machine token lists only with a filter naming its own machine.
var abuseKinds = map[string][3]string{
	api.KindMachines:             {"U . . . . . F U U U", "U . . . . . . U U U", "U F . . F F F U U U"},
	api.KindJobs:                 {"U . . . . . F U U U", "U . . . . . . U U U", "U F . . F F F U U U"},
	api.KindTasks:                {"U . . . . . F U U U", "U . . . . . F U U U", "U F . . F F F U U U"},
	api.KindProfiles:             {"U . . . . . F U U U", "U . . . . . F U U U", "U F . . F F F U U U"},
	api.KindPools:                {"U . . . . . F U U U", "U . . . . . F U U U", "U F . . F F F U U U"},
	api.KindPods:                 {"U . . . . . F U U U", "U . . . . . F U U U", "U F . . F F F U U U"},
	api.KindFabrics:              {"U . . . . . F U U U", "U . . . . . F U U U", "U F . . F F F U U U"},
	api.KindVLANs:                {"U . . . . . F U U U", "U . . . . . F U U U", "U F . . F F F U U U"},
	api.KindSubnets:              {"U . . . . . F U U U", "U . . . . . F U U U", "U F . . F F F U U U"},
	api.KindLeases:               {"U . . . . . F U U U", "U . . . . . F U U U", "U F . . F F F U U U"},
	api.KindRacks:                {"U . . . . . F U U U", "U . . . . . F U U U", "U F . . F F F U U U"},
	api.KindUsers:                {"U F F . F F F U U U", "U F F . F F F U U U", "U F F . F F F U U U"},
	api.KindDomains:              {"U . . . . . F U U U", "U . . . . . F U U U", "U F . . F F F U U U"},
	api.KindDNSRecords:           {"U . . . . . F U U U", "U . . . . . F U U U", "U F . . F F F U U U"},
	api.KindCommissioningScripts: {"U . . . . . F U U U", "U . . . . . F U U U", "U F . . F F F U U U"},
}

// abuseRouteRows is every route the suite covers with its expected row.
func abuseRouteRows() map[string]string {
	rows := map[string]string{}
	for pattern, row := range abuseRoutes {
		rows[pattern] = row
	}
	for kind, access := range abuseKinds {
		coll, item := "/api/v1/"+kind, "/api/v1/"+kind+"/{key}"
		rows["GET "+coll], rows["GET "+item] = access[0], access[1]
		for _, m := range []string{"POST " + coll, "PUT " + item, "PATCH " + item, "DELETE " + item} {
			rows[m] = access[2]
		}
	}
	return rows
}

// abuseRouteMatrix compares the covered routes with the server's route table, then calls
// each route as every principal.
func abuseRouteMatrix(t *testing.T, s *abuseStack) {
	rows := abuseRouteRows()
	served := map[string]server.Route{}
	for _, rt := range s.srv.Routes() {
		served[rt.Pattern] = rt
		row, ok := rows[rt.Pattern]
		if !ok {
			t.Errorf("route %q is not in the abuse suite: add its row of who may call it to abuseRoutes (integration/abuse_routes_test.go), "+
				"its body checks to abuseBodies and its credential to ARCHITECTURE.md's threat model", rt.Pattern)
			continue
		}
		if !rt.Public && !strings.HasPrefix(row, "U") {
			t.Errorf("route %q needs a token, but its row %q says anonymous callers get past authentication", rt.Pattern, row)
		}
	}
	for pattern := range rows {
		if _, ok := served[pattern]; !ok {
			t.Errorf("the abuse suite covers %q, which the region no longer serves: remove its row", pattern)
		}
	}
	patterns := slices.Sorted(func(yield func(string) bool) {
		for p := range served {
			if _, ok := rows[p]; ok && !yield(p) {
				return
			}
		}
	})
	for _, pattern := range patterns {
		t.Run(pattern, func(t *testing.T) {
			method, path := s.fillRoute(served[pattern])
			var body []byte
			if method != "GET" {
				body = []byte("[")
			}
			got := make([]string, principals)
			for p := range principals {
				a := s.call(t, p, method, path, body)
				if a.code >= 500 {
					t.Errorf("%s %s as %s: %d %s", method, path, p, a.code, a.body)
				}
				got[p] = accessMark(a.code)
			}
			if want, have := rows[pattern], strings.Join(got, " "); have != want {
				t.Errorf("%s %s: who may call it\n have %s\n want %s\n      (%s)", method, path, have, want, strings.Join(principalNames[:], ", "))
			}
		})
	}
}

// accessMark is a status in the notation of abuseRoutes.
func accessMark(code int) string {
	switch code {
	case 401:
		return "U"
	case 403:
		return "F"
	}
	return "."
}

// fillRoute gives pattern's wildcards the values of the matrix: machine A and its job on the
// agent API, rack A on the rack API, and objects that do not exist elsewhere.
func (s *abuseStack) fillRoute(rt server.Route) (method, path string) {
	method, path, _ = strings.Cut(rt.Pattern, " ")
	uuidValue := abuseMissing
	switch {
	case strings.HasPrefix(path, "/api/v1/agent/"):
		uuidValue = s.machineA.Uuid
	case rt.Resource == "rackapi" || rt.Resource == "powercredential":
		uuidValue = s.rackA.Uuid
	}
	r := strings.NewReplacer("{uuid}", uuidValue, "{key}", abuseMissing, "{job}", s.jobA.Uuid, "{machine}", abuseMissing,
		"{pod}", abuseMissing, "{name}", "nobody", "{name...}", "nobody", "{id}", fmt.Sprint(1<<40))
	return method, r.Replace(path)
}
