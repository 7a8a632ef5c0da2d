package depsrule

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/ironflow/ironflow"

// rule forbids the packages under From, but those under one of Skip, from depending, directly
// or not, on any package under one of Forbidden, except the packages under one of Allowed; a
// Direct rule looks at the packages' own imports only. Paths are relative to the module; "x"
// covers x and x/....
type rule struct {
	From      string
	Skip      []string
	Forbidden []string
	Allowed   []string
	Direct    bool
	Why       string
}

var rules = []rule{
	{
		From:      "rack",
		Forbidden: []string{"workflows", "region/store", "agent", "activities"},
		Allowed:   []string{"activities/rack", "activities/heartbeat"},
		Why:       "the rack controller is an edge service: it talks to its region through region/api and runs only its own activities",
	},
	{
		From:      "agent",
		Forbidden: []string{"workflows", "activities", "region/store"},
		Why:       "the machine agent talks to its region through region/api only",
	},
	{
		From:      "region/server",
		Forbidden: []string{"workflows"},
		Why:       "regions never drive migrations; workflows reach regions through activities",
	},
	{
		From:      "workflows",
		Forbidden: []string{"region/store", "region/server"},
		Why:       "workflows, and the client side of moves, reach a region only through activities and its HTTP API",
	},
	{
		// Direct: the workflows name the rack's activities (activities/rack), which drive the
		// rack's packages themselves.
		From:      "workflows",
		Forbidden: []string{"rack"},
		Direct:    true,
		Why:       "a workflow's payloads are region/api types; workflows reach a rack through its activities only",
	},
	{
		From:      "activities",
		Skip:      []string{"activities/rack"},
		Forbidden: []string{"rack"},
		Why:       "only the rack's own activities, run by the rack, drive its packages",
	},
	{
		From:      "activities",
		Forbidden: []string{"region/store", "region/server"},
		Why:       "activities call regions over HTTP (region/client); a region's database is its own",
	},
}

// under reports whether the module package pkg is p or below p.
func under(pkg, p string) bool {
	full := module + "/" + p
	return pkg == full || strings.HasPrefix(pkg, full+"/")
}

func underAny(pkg string, ps []string) bool {
	for _, p := range ps {
		if under(pkg, p) {
			return true
		}
	}
	return false
}

// violations returns, for every package the rule applies to, the forbidden packages it depends on.
func (r rule) violations(deps map[string][]string) (subjects int, bad map[string][]string) {
	bad = map[string][]string{}
	for pkg, ds := range deps {
		if !under(pkg, r.From) || underAny(pkg, r.Skip) {
			continue
		}
		subjects++
		for _, d := range ds {
			if underAny(d, r.Forbidden) && !underAny(d, r.Allowed) {
				bad[pkg] = append(bad[pkg], d)
			}
		}
	}
	return subjects, bad
}

// listDeps returns every package of the module with its transitive (non-test) dependencies,
// and with its own imports.
func listDeps(t *testing.T) (deps, imports map[string][]string) {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the dependency rules need the go command: %v", err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(goBin, "list", "-json=ImportPath,Imports,Deps", module+"/...")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	deps, imports = map[string][]string{}, map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Imports    []string
			Deps       []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		deps[p.ImportPath] = p.Deps
		imports[p.ImportPath] = p.Imports
	}
	return deps, imports
}

// TestDependencyRules fails when a package depends on one it must never reach.
func TestDependencyRules(t *testing.T) {
	deps, imports := listDeps(t)
	for _, r := range rules {
		graph, verb := deps, "depend on"
		if r.Direct {
			graph, verb = imports, "import"
		}
		subjects, bad := r.violations(graph)
		if subjects == 0 {
			t.Errorf("rule for %s matches no package: was it renamed? Update the rule.", r.From)
		}
		for pkg, ds := range bad {
			t.Errorf("%s must not %s %v (%s), but it does: %s", strings.TrimPrefix(pkg, module+"/"), verb, r.Forbidden, r.Why, strings.Join(ds, ", "))
		}
	}
}

// TestRulesCatchAViolation checks the rule matching itself against a made-up graph, so that a
// mistake in the matching cannot make TestDependencyRules pass vacuously.
func TestRulesCatchAViolation(t *testing.T) {
	deps := map[string][]string{
		module + "/rack":          {module + "/activities/rack", module + "/region/api"},
		module + "/rack/dhcp":     {module + "/activities/esxi"},
		module + "/agent":         {module + "/region/store/internal"},
		module + "/region/server": {module + "/workflowsx"},
	}
	_, bad := rules[0].violations(deps)
	if len(bad) != 1 || len(bad[module+"/rack/dhcp"]) != 1 {
		t.Errorf("rack rule: got %v, want only rack/dhcp -> activities/esxi", bad)
	}
	if _, bad := rules[1].violations(deps); len(bad) != 1 {
		t.Errorf("agent rule: got %v, want agent -> region/store/internal", bad)
	}
	if _, bad := rules[2].violations(deps); len(bad) != 0 {
		t.Errorf("region/server rule: got %v, want none (workflowsx is not workflows)", bad)
	}

	imports := map[string][]string{
		module + "/workflows":       {module + "/activities/rack", module + "/rack/pods"},
		module + "/workflows/moves": {module + "/racks"},
		module + "/activities":      {module + "/rack"},
		module + "/activities/rack": {module + "/rack/pods"},
	}
	if _, bad := rules[4].violations(imports); len(bad) != 1 || len(bad[module+"/workflows"]) != 1 {
		t.Errorf("workflows -> rack rule: got %v, want only workflows -> rack/pods", bad)
	}
	if _, bad := rules[5].violations(imports); len(bad) != 1 || len(bad[module+"/activities"]) != 1 {
		t.Errorf("activities -> rack rule: got %v, want only activities -> rack (activities/rack is skipped)", bad)
	}
}

// TestArchitectureListsEveryPackage keeps the package map of ARCHITECTURE.md complete: a new
// package gets its line there.
func TestArchitectureListsEveryPackage(t *testing.T) {
	doc, err := os.ReadFile("../../ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	deps, _ := listDeps(t)
	for pkg := range deps {
		rel := strings.TrimPrefix(pkg, module+"/")
		if !bytes.Contains(doc, []byte("| `"+rel+"` |")) {
			t.Errorf("ARCHITECTURE.md has no line for package %s in its package map", rel)
		}
	}
}
