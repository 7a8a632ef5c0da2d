package workflows_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
)

// TestEveryVersionChangeHasARecordedHistory fails when workflow code takes a GetVersion
// change no recorded history covers: each change ID (the package's string constants named
// ...Change) must appear in the Version markers of at least one history under testdata/,
// so the replay tests check the new path against a real server's history. Record one with
// the dev-server test of the change (go test ./workflows -run ...OnDevServer -record).
func TestEveryVersionChangeHasARecordedHistory(t *testing.T) {
	recorded := recordedChangeIDs(t, "testdata")
	for _, id := range versionChangeIDs(t, ".") {
		if !recorded[id] {
			t.Errorf("GetVersion change %q is in no recorded history under testdata/: record one that takes it", id)
		}
	}
}

// versionChangeIDs are the values of the string constants named ...Change in the package's
// non-test files.
func versionChangeIDs(t *testing.T, dir string) []string {
	t.Helper()
	pkgs, err := parser.ParseDir(token.NewFileSet(), dir, func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			ast.Inspect(f, func(n ast.Node) bool {
				spec, ok := n.(*ast.ValueSpec)
				if !ok {
					return true
				}
				for i, name := range spec.Names {
					if !strings.HasSuffix(name.Name, "Change") || i >= len(spec.Values) {
						continue
					}
					if lit, ok := spec.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						id, err := strconv.Unquote(lit.Value)
						if err != nil {
							t.Fatal(err)
						}
						ids = append(ids, id)
					}
				}
				return true
			})
		}
	}
	if len(ids) == 0 {
		t.Fatal("no GetVersion change IDs found in the workflow source")
	}
	slices.Sort(ids)
	return ids
}

// recordedChangeIDs are the change IDs of the Version markers of every history under dir.
func recordedChangeIDs(t *testing.T, dir string) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_history.json") {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
		if err != nil {
			return err
		}
		for _, e := range h.GetEvents() {
			m := e.GetMarkerRecordedEventAttributes()
			if m.GetMarkerName() != "Version" {
				continue
			}
			var id string
			if err := converter.GetDefaultDataConverter().FromPayloads(m.GetDetails()["change-id"], &id); err != nil {
				return err
			}
			ids[id] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}
