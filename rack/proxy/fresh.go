package proxy

import (
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"
)

// policy is how a cached object may be served again without asking its upstream.
type policy int

const (
	// revalidate: every request asks the upstream whether the object changed (a
	// conditional request): apt's indexes, which change in place under the same URL.
	revalidate policy = iota
	// immutable: a package file or a by-hash index, whose URL names one content for good.
	immutable
	// fresh until the upstream's max-age or Expires.
	untilExpiry
)

// indexNames are the file names of a Debian repository's indexes (dists/…): they change in
// place, so a cached copy is revalidated on every request, as apt expects of a proxy.
var indexNames = []string{"Release", "InRelease", "Release.gpg", "Packages", "Sources", "Contents-", "Translation-", "Components-", "Index", "Commands-", "icons-"}

// objectPolicy is the cache policy of a URL path and its upstream response.
func objectPolicy(urlPath string, h http.Header, now time.Time) (policy, time.Time) {
	if strings.Contains(urlPath, "/by-hash/") {
		return immutable, time.Time{}
	}
	base := path.Base(urlPath)
	for _, n := range indexNames {
		if strings.HasPrefix(base, n) {
			return revalidate, time.Time{}
		}
	}
	if until, ok := expiry(h, now); ok {
		return untilExpiry, until
	}
	switch path.Ext(base) {
	case ".deb", ".udeb", ".ddeb", ".dsc":
		return immutable, time.Time{} // pool files are versioned by name
	}
	return revalidate, time.Time{}
}

// expiry is when the upstream says a response stops being fresh (max-age, then Expires).
func expiry(h http.Header, now time.Time) (time.Time, bool) {
	for _, d := range directives(h.Get("Cache-Control")) {
		if v, ok := strings.CutPrefix(d, "s-maxage="); ok {
			return secondsAfter(now, v)
		}
		if v, ok := strings.CutPrefix(d, "max-age="); ok {
			return secondsAfter(now, v)
		}
	}
	if e := h.Get("Expires"); e != "" {
		t, err := http.ParseTime(e)
		return t, err == nil
	}
	return time.Time{}, false
}

func secondsAfter(now time.Time, v string) (time.Time, bool) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, false
	}
	return now.Add(time.Duration(n) * time.Second), true
}

// storable says whether the upstream allows a shared cache to keep a response, and the
// request's cache-relevant headers allow it to be shared.
func storable(req *http.Request, resp *http.Response) bool {
	if resp.StatusCode != http.StatusOK || req.Header.Get("Authorization") != "" || resp.Header.Get("Set-Cookie") != "" {
		return false
	}
	if v := resp.Header.Get("Vary"); v != "" && !strings.EqualFold(strings.TrimSpace(v), "Accept-Encoding") {
		return false
	}
	for _, d := range directives(resp.Header.Get("Cache-Control")) {
		if d == "no-store" || d == "private" || d == "no-cache" {
			return false
		}
	}
	return true
}

// wantsRevalidation says whether the client asks that a cached copy be checked upstream
// first (apt sends max-age=0 for indexes; no-cache when told not to trust caches).
func wantsRevalidation(h http.Header) bool {
	if strings.Contains(strings.ToLower(h.Get("Pragma")), "no-cache") {
		return true
	}
	for _, d := range directives(h.Get("Cache-Control")) {
		if d == "no-cache" || d == "max-age=0" {
			return true
		}
	}
	return false
}

func directives(cc string) []string {
	var out []string
	for d := range strings.SplitSeq(cc, ",") {
		if d = strings.ToLower(strings.TrimSpace(d)); d != "" {
			out = append(out, d)
		}
	}
	return out
}
