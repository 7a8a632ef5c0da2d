package depsrule

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// requestBuilders are the net/http calls that build or send a request of their own. Outside
// requestBuilderAllowed, only region/client may use them: every call of the region API goes
// through its one low-level call, so every caller gets the same errors (*client.APIError,
// *client.RedirectError) and the same answer limits.
var requestBuilders = []string{
	"net/http.NewRequest",
	"net/http.NewRequestWithContext",
	"net/http.Get",
	"net/http.Head",
	"net/http.Post",
	"net/http.PostForm",
	"(*net/http.Client).Do",
	"(*net/http.Client).Get",
	"(*net/http.Client).Head",
	"(*net/http.Client).Post",
	"(*net/http.Client).PostForm",
}

// requestBuilderAllowed are the files, relative to the module, that build HTTP requests
// without region/client, each with its reason.
var requestBuilderAllowed = map[string]string{
	"region/server/queue.go": "the region replays a queued write against its own handler, in process, as the caller who queued it",
	"dev/benchmoves/main.go": "the benchmark scrapes the Temporal server's Prometheus metrics, not a region",
}

// regionClientPackage is the package that may build requests to the region API.
const regionClientPackage = "region/client"

// modulePackage is what the HTTP rule needs of one package of the module.
type modulePackage struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Export     string
	Standard   bool
}

// listExports asks go list for every package of the module and their dependencies, with the
// compiler's export data, which the type checker imports: like go vet, the rule sees each
// package's files with their types.
func listExports(t *testing.T) (own []modulePackage, exports map[string]string) {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the HTTP rule needs the go command: %v", err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(goBin, "list", "-export", "-deps", "-json=ImportPath,Dir,GoFiles,Export,Standard", module+"/...")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v\n%s", err, stderr.String())
	}
	exports = map[string]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p modulePackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		exports[p.ImportPath] = p.Export
		if p.ImportPath == module || strings.HasPrefix(p.ImportPath, module+"/") {
			own = append(own, p)
		}
	}
	return own, exports
}

// requestBuilderUse is one use of a requestBuilders function.
type requestBuilderUse struct {
	pos  token.Position
	name string
}

// requestBuilderUses type-checks the files of one package and returns its uses of
// requestBuilders.
func requestBuilderUses(fset *token.FileSet, imp types.Importer, path string, files []*ast.File) ([]requestBuilderUse, error) {
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: imp}
	if _, err := conf.Check(path, fset, files, info); err != nil {
		return nil, err
	}
	var uses []requestBuilderUse
	for id, obj := range info.Uses {
		fn, ok := obj.(*types.Func)
		if ok && slices.Contains(requestBuilders, fn.FullName()) {
			uses = append(uses, requestBuilderUse{pos: fset.Position(id.Pos()), name: fn.FullName()})
		}
	}
	slices.SortFunc(uses, func(a, b requestBuilderUse) int {
		return cmp.Or(strings.Compare(a.pos.Filename, b.pos.Filename), cmp.Compare(a.pos.Offset, b.pos.Offset))
	})
	return uses, nil
}

// exportImporter imports packages from the export data go list built.
func exportImporter(fset *token.FileSet, exports map[string]string) types.Importer {
	return importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok || file == "" {
			return nil, errors.New("no export data for " + path)
		}
		return os.Open(file)
	})
}

// TestOnlyRegionClientBuildsHTTPRequests fails naming the file and line of every request
// built with net/http outside region/client and the allowed files.
func TestOnlyRegionClientBuildsHTTPRequests(t *testing.T) {
	own, exports := listExports(t)
	fset := token.NewFileSet()
	imp := exportImporter(fset, exports)
	used := map[string]bool{}
	for _, p := range own {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if rel == regionClientPackage {
			continue
		}
		var files []*ast.File
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		uses, err := requestBuilderUses(fset, imp, p.ImportPath, files)
		if err != nil {
			t.Fatalf("type-check %s: %v", rel, err)
		}
		for _, u := range uses {
			file := filepath.ToSlash(filepath.Join(rel, filepath.Base(u.pos.Filename)))
			if _, ok := requestBuilderAllowed[file]; ok {
				used[file] = true
				continue
			}
			t.Errorf("%s:%d: %s builds an HTTP request outside %s: call the region through client.Client.Do, or add the file to requestBuilderAllowed with the reason", file, u.pos.Line, u.name, regionClientPackage)
		}
	}
	for file := range requestBuilderAllowed {
		if !used[file] {
			t.Errorf("requestBuilderAllowed lists %s, which builds no HTTP request: drop the entry", file)
		}
	}
}

// TestHTTPRuleCatchesAViolation checks the matching against made-up code, so that a mistake
// in it cannot make TestOnlyRegionClientBuildsHTTPRequests pass vacuously.
func TestHTTPRuleCatchesAViolation(t *testing.T) {
	const src = `package p

import (
	"context"
	web "net/http"
)

func call(ctx context.Context, c *web.Client) {
	req, _ := web.NewRequestWithContext(ctx, web.MethodGet, "http://region/api/v1/info", nil)
	send := c.Do
	send(req)
	web.Get("http://region/healthz")
	web.NewServeMux()
}
`
	_, exports := listExports(t)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	uses, err := requestBuilderUses(fset, exportImporter(fset, exports), "p", []*ast.File{f})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range uses {
		got = append(got, u.name)
	}
	want := []string{"net/http.NewRequestWithContext", "(*net/http.Client).Do", "net/http.Get"}
	if !slices.Equal(got, want) {
		t.Errorf("uses %v, want %v", got, want)
	}
}
