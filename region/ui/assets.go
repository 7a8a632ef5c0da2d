package ui

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed static templates
var files embed.FS

// assetPrefix is where the static files are served, each under a name carrying its hash, so
// a release's files are cached for good and a new release's are fetched at once.
const assetPrefix = "/static/"

// assets are the embedded static files by their hashed names.
type assets struct {
	byName   map[string]string // "app.css" → "/static/app.3f2a….css"
	byHashed map[string][]byte // "app.3f2a….css" → content
}

func loadAssets() (*assets, error) {
	a := &assets{byName: map[string]string{}, byHashed: map[string][]byte{}}
	entries, err := fs.ReadDir(files, "static")
	if err != nil {
		return nil, fmt.Errorf("UI assets: %w", err)
	}
	for _, e := range entries {
		data, err := files.ReadFile("static/" + e.Name())
		if err != nil {
			return nil, fmt.Errorf("UI asset %s: %w", e.Name(), err)
		}
		sum := sha256.Sum256(data)
		ext := path.Ext(e.Name())
		hashed := strings.TrimSuffix(e.Name(), ext) + "." + hex.EncodeToString(sum[:6]) + ext
		a.byName[e.Name()] = assetPrefix + hashed
		a.byHashed[hashed] = data
	}
	return a, nil
}

// url is the hashed URL of a static file; templates call it as {{asset "app.css"}}.
func (a *assets) url(name string) (string, error) {
	u, ok := a.byName[name]
	if !ok {
		return "", fmt.Errorf("no UI asset %q", name)
	}
	return u, nil
}

// serve answers a hashed static file, cached for a year: its name changes with its content.
func (a *assets) serve(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	data, ok := a.byHashed[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	switch path.Ext(name) {
	case ".js":
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case ".css":
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	}
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	_, _ = w.Write(data)
}

// parsePages parses each page with the layout around it, under the page's name.
func parsePages(a *assets) (map[string]*template.Template, error) {
	names, err := fs.Glob(files, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("UI templates: %w", err)
	}
	pages := map[string]*template.Template{}
	for _, name := range names {
		base := strings.TrimSuffix(path.Base(name), ".html")
		if base == "layout" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs(a)).ParseFS(files, "templates/layout.html", name)
		if err != nil {
			return nil, fmt.Errorf("UI template %s: %w", name, err)
		}
		pages[base] = t
	}
	return pages, nil
}
