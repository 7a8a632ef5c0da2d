package integration

import (
	"encoding/base64"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/internal/payloadcodec"
)

// abuseCodecEndpoint: the codec endpoint (`ironflow codec serve`) decodes and encodes for the
// region's admins only; every other caller of the region, and a caller with no token, is
// refused and gets no payload; a body above its limit is refused before it is decoded.
func abuseCodecEndpoint(t *testing.T, s *abuseStack) {
	codec, err := payloadcodec.Parse(strings.NewReader("abuse:" + base64.StdEncoding.EncodeToString(make([]byte, 32)) + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	endpoint := httptest.NewServer(&payloadcodec.Endpoint{Codec: codec, Region: s.url, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(endpoint.Close)
	empty := []byte(`{"payloads":[]}`)
	for _, path := range []string{"/decode", "/encode"} {
		for who := range principals {
			a := callAs(t, s.tokens[who], http.MethodPost, endpoint.URL+path, empty)
			switch {
			case who == admin && a.code != http.StatusOK:
				t.Errorf("POST %s as admin: %d %s, want 200", path, a.code, a.body)
			case who != admin && a.code != http.StatusUnauthorized && a.code != http.StatusForbidden:
				t.Errorf("POST %s as %s: %d %s, want 401 or 403", path, who, a.code, a.body)
			case who != admin && strings.Contains(string(a.body), `"payloads":`):
				t.Errorf("POST %s as %s answered payloads: %s", path, who, a.body)
			}
		}
	}
	big := []byte(`{"payloads":[{"data":"` + strings.Repeat("A", payloadcodec.MaxRequestBytes) + `"}]}`)
	if a := callAs(t, s.tokens[admin], http.MethodPost, endpoint.URL+"/decode", big); a.code != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over %d bytes as admin: %d, want 413", payloadcodec.MaxRequestBytes, a.code)
	}
}
