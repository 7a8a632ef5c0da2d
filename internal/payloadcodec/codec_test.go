package payloadcodec_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/ironflow/ironflow/internal/payloadcodec"
	"github.com/ironflow/ironflow/region/api"
)

func keyLine(id string, fill byte) string {
	return id + ":" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{fill}, payloadcodec.KeySize)) + "\n"
}

func parse(t *testing.T, lines ...string) *payloadcodec.Codec {
	t.Helper()
	c, err := payloadcodec.Parse(strings.NewReader(strings.Join(lines, "")))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestKeyRotation: payloads are sealed with the first key and opened with any key of the
// file, so a new key goes first and the old ones stay until no history needs them.
func TestKeyRotation(t *testing.T) {
	old := parse(t, keyLine("2025", 1))
	rotated := parse(t, keyLine("2026", 2), keyLine("2025", 1))
	dc := old.DataConverter()
	p, err := dc.ToPayload("grant-secret")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(p.GetData(), []byte("grant-secret")) || string(p.GetMetadata()[payloadcodec.MetadataKeyID]) != "2025" {
		t.Fatalf("sealed payload %v", p)
	}
	var got string
	if err := rotated.DataConverter().FromPayload(p, &got); err != nil || got != "grant-secret" {
		t.Errorf("the rotated keys open %q, %v", got, err)
	}
	if p, _ = rotated.DataConverter().ToPayload("x"); string(p.GetMetadata()[payloadcodec.MetadataKeyID]) != "2026" {
		t.Errorf("sealed with %q, want the current key 2026", p.GetMetadata()[payloadcodec.MetadataKeyID])
	}
	if err := old.DataConverter().FromPayload(p, &got); err == nil || !strings.Contains(err.Error(), `"2026"`) {
		t.Errorf("a payload of an unknown key: %v, want an error naming the key", err)
	}
}

// TestClearPayloadsPassThrough: histories recorded before encryption still decode.
func TestClearPayloadsPassThrough(t *testing.T) {
	clear, err := converter.GetDefaultDataConverter().ToPayload(map[string]string{"Grant": "g"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := parse(t, keyLine("k", 1)).Decode([]*commonpb.Payload{clear})
	if err != nil || out[0] != clear {
		t.Errorf("decode of a clear payload: %v, %v", out, err)
	}
}

// TestRelabelledPayloadRefused: the key ID is authenticated, so a payload does not open
// under another key's ID.
func TestRelabelledPayloadRefused(t *testing.T) {
	c := parse(t, keyLine("a", 1), keyLine("b", 1)) // same bytes: only the ID differs
	sealed, err := c.Encode([]*commonpb.Payload{{Data: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	sealed[0].Metadata[payloadcodec.MetadataKeyID] = []byte("b")
	if _, err := c.Decode(sealed); err == nil {
		t.Error("a payload relabelled with another key's ID opened")
	}
}

func TestBadKeyFiles(t *testing.T) {
	for name, text := range map[string]string{
		"empty":     "# nothing\n",
		"short key": "k:" + base64.StdEncoding.EncodeToString([]byte("short")) + "\n",
		"no id":     ":" + strings.TrimPrefix(keyLine("", 1), ":"),
		"twice":     keyLine("k", 1) + keyLine("k", 2),
	} {
		if _, err := payloadcodec.Parse(strings.NewReader(text)); err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{2}, payloadcodec.KeySize))) {
			t.Errorf("%s: the error shows the key: %v", name, err)
		}
	}
	path := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(path, []byte(keyLine("k", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := payloadcodec.LoadFile(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a key file others may read: %v", err)
	}
}

// TestEnsureFileKeepsItsKey: the dev stack's key file is made once, 0600, and kept.
func TestEnsureFileKeepsItsKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "payload.keys")
	first, err := payloadcodec.EnsureFile(path)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("key file %v, %v; want mode 0600", info, err)
	}
	p, err := first.DataConverter().ToPayload("x")
	if err != nil {
		t.Fatal(err)
	}
	again, err := payloadcodec.EnsureFile(path)
	var got string
	if err != nil || again.DataConverter().FromPayload(p, &got) != nil || got != "x" {
		t.Errorf("the key file was not kept: %v", err)
	}
}

// TestEndpointLimits: CORS answers the allowed origin only, and a body over MaxRequestBytes
// is refused even to an admin.
func TestEndpointLimits(t *testing.T) {
	region := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(api.Whoami{User: "root", Role: api.RoleAdmin})
	}))
	t.Cleanup(region.Close)
	e := httptest.NewServer(&payloadcodec.Endpoint{Codec: parse(t, keyLine("k", 1)), Region: region.URL, AllowOrigins: []string{"http://ui.example"}, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(e.Close)
	for origin, want := range map[string]string{"http://ui.example": "http://ui.example", "http://evil.example": ""} {
		req, _ := http.NewRequest(http.MethodOptions, e.URL+"/decode", nil)
		req.Header.Set("Origin", origin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Access-Control-Allow-Origin"); got != want {
			t.Errorf("preflight from %s: allowed origin %q, want %q", origin, got, want)
		}
	}
	body := `{"payloads":[{"data":"` + strings.Repeat("A", payloadcodec.MaxRequestBytes) + `"}]}`
	req, _ := http.NewRequest(http.MethodPost, e.URL+"/decode", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer admin")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over the limit: HTTP %d, want 413", resp.StatusCode)
	}
}
