package httpboot

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/ironflow/ironflow/rack/imagecache"
)

// failingImages answers every Open with err.
type failingImages struct{ err error }

func (f failingImages) Open(context.Context, string) (*imagecache.Handle, error) { return nil, f.err }

// Images go to loopback and the rack's clients only; a cache with no room is 503 with
// Retry-After, so a machine waits rather than gives up; a bad name never reaches the cache.
func TestImagesServedToClientsOnly(t *testing.T) {
	served := netip.MustParsePrefix("10.20.0.0/24")
	r := startRackWithConfig(t, func(c *Config) {
		c.Images = failingImages{fmt.Errorf("%w: test", imagecache.ErrFull)}
		c.Serves = served.Contains
	}, machines{}, "http://127.0.0.1:1")
	for _, tc := range []struct {
		remote, path string
		code         int
	}{
		{"192.0.2.9:4000", "/images/deb", http.StatusForbidden},
		{"[2001:db8::1]:4000", "/images/deb", http.StatusForbidden},
		{"10.20.0.5:4000", "/images/deb", http.StatusServiceUnavailable},
		{"127.0.0.1:4000", "/images/deb", http.StatusServiceUnavailable},
		{"10.20.0.5:4000", "/images/.hidden", http.StatusBadRequest},
	} {
		req := httptest.NewRequest(http.MethodGet, tc.path, nil)
		req.RemoteAddr = tc.remote
		rec := httptest.NewRecorder()
		r.srv.Handler().ServeHTTP(rec, req)
		if rec.Code != tc.code {
			t.Errorf("GET %s from %s: %d, want %d: %s", tc.path, tc.remote, rec.Code, tc.code, rec.Body)
		}
		if tc.code == http.StatusServiceUnavailable && rec.Header().Get("Retry-After") == "" {
			t.Errorf("GET %s from %s: 503 without Retry-After", tc.path, tc.remote)
		}
	}
}
