package server

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/region/api"
)

// apiDoc is the API reference that lists every route.
const apiDoc = "../../docs/api.md"

// roleOrder is how docs/api.md lists a route's roles.
var roleOrder = []string{api.RoleAdmin, api.RoleOperator, api.RoleReadonly, api.RoleRack, api.RoleMachine}

// documentedRoles is what a route's roles column must say: public, or every role the
// permission table lets through.
func documentedRoles(rt Route) string {
	if rt.Public {
		return "public"
	}
	var roles []string
	for _, role := range roleOrder {
		switch authorize(role, rt.Resource, rt.Write) {
		case granted:
			roles = append(roles, role)
		case ownOnly:
			roles = append(roles, role+" (own)")
		}
	}
	return strings.Join(roles, ", ")
}

// apiDocRow is one row of docs/api.md's route tables: `| METHOD | `path` | roles | [kinds |] body |`.
type apiDocRow struct {
	pattern, roles string
	kinds          []string // for /api/v1/{kind} rows: the kinds the row stands for
}

var apiDocRowLine = regexp.MustCompile("^\\| (GET|POST|PUT|PATCH|DELETE) \\| `([^`]+)` \\| ([^|]*) \\|")

func readAPIDoc(t *testing.T) []apiDocRow {
	t.Helper()
	b, err := os.ReadFile(apiDoc)
	if err != nil {
		t.Fatal(err)
	}
	var rows []apiDocRow
	for _, line := range strings.Split(string(b), "\n") {
		m := apiDocRowLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		row := apiDocRow{pattern: m[1] + " " + m[2], roles: strings.TrimSpace(m[3])}
		if strings.Contains(m[2], "{kind}") {
			cells := strings.Split(line, "|")
			for _, k := range strings.Split(cells[4], ",") {
				row.kinds = append(row.kinds, strings.Trim(strings.TrimSpace(k), "`"))
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// kindPattern turns "GET /api/v1/pools/{key}" into "GET /api/v1/{kind}/{key}" and "pools"
// when the path is a generic route of a kind.
func kindPattern(pattern string) (generic, kind string, ok bool) {
	method, path, _ := strings.Cut(pattern, " ")
	rest, found := strings.CutPrefix(path, api.PathPrefix+"/")
	if !found {
		return "", "", false
	}
	kind, item, _ := strings.Cut(rest, "/")
	if item != "" && item != "{key}" || !slices.ContainsFunc(api.Kinds, func(k api.Kind) bool { return k.Name == kind }) {
		return "", "", false
	}
	generic = method + " " + api.PathPrefix + "/{kind}"
	if item != "" {
		generic += "/{key}"
	}
	return generic, kind, true
}

// TestAPIReferenceListsEveryRoute holds docs/api.md to the route table: every route the
// region serves has a row with the roles the permission table lets through, and every row is
// a route the region serves.
func TestAPIReferenceListsEveryRoute(t *testing.T) {
	rows := readAPIDoc(t)
	if len(rows) == 0 {
		t.Fatalf("no route rows in %s", apiDoc)
	}
	used := make([]bool, len(rows))
	usedKinds := map[int]map[string]bool{}
	for _, rt := range New(nil, Config{}).Routes() {
		generic, kind, isKind := kindPattern(rt.Pattern)
		found := false
		for i, row := range rows {
			if row.pattern != rt.Pattern && !(isKind && row.pattern == generic && slices.Contains(row.kinds, kind)) {
				continue
			}
			found, used[i] = true, true
			if isKind && row.pattern == generic {
				if usedKinds[i] == nil {
					usedKinds[i] = map[string]bool{}
				}
				usedKinds[i][kind] = true
			}
			if want := documentedRoles(rt); row.roles != want {
				t.Errorf("%s: docs/api.md says roles %q, the permission table lets through %q", rt.Pattern, row.roles, want)
			}
			break
		}
		if !found {
			t.Errorf("route %q is not in docs/api.md: add its row (roles %q) and what it takes", rt.Pattern, documentedRoles(rt))
		}
	}
	for i, row := range rows {
		if !used[i] {
			t.Errorf("docs/api.md documents %q (kinds %v), which the region does not serve", row.pattern, row.kinds)
		}
		for _, k := range row.kinds {
			if used[i] && !usedKinds[i][k] {
				t.Errorf("docs/api.md documents %q for kind %q, which has no such route with those roles", row.pattern, k)
			}
		}
	}
}
