package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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
	// A browser signed in to the region's UI (the Temporal UI's "include credentials") is
	// its session's principal: an admin's decodes, any other's or a made-up one does not.
	for who, want := range map[principal]int{admin: http.StatusOK, operator: http.StatusForbidden, readonly: http.StatusForbidden, anonymous: http.StatusUnauthorized} {
		cookie := "ironflow_session=made-up"
		if who != anonymous {
			sess, err := s.st.CreateUISession(context.Background(), s.tokens[who], time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			cookie = "ironflow_session=" + sess.ID
		}
		req, err := http.NewRequest(http.MethodPost, endpoint.URL+"/decode", bytes.NewReader(empty))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Cookie", "other=1; "+cookie)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("POST /decode with the UI session of %s: %d, want %d", who, resp.StatusCode, want)
		}
	}
	big := []byte(`{"payloads":[{"data":"` + strings.Repeat("A", payloadcodec.MaxRequestBytes) + `"}]}`)
	if a := callAs(t, s.tokens[admin], http.MethodPost, endpoint.URL+"/decode", big); a.code != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over %d bytes as admin: %d, want 413", payloadcodec.MaxRequestBytes, a.code)
	}
}
