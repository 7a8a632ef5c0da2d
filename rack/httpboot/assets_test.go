package httpboot

import (
	"bytes"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ironflow/ironflow/rack/regionlink/regionlinktest"
)

func TestAssetRanges(t *testing.T) {
	rack := startRack(t, machines{}, regionlinktest.Start(t, "a").URL)
	data := rack.writeFile(t, "images/initrd.img", 2<<20+13)
	n := len(data)
	tests := []struct {
		rangeHdr string
		wantCode int
		want     []byte
	}{
		{"", http.StatusOK, data},
		{"bytes=0-99", http.StatusPartialContent, data[:100]},
		{"bytes=1048576-", http.StatusPartialContent, data[1048576:]},
		{"bytes=-500", http.StatusPartialContent, data[n-500:]},
		{"bytes=1000-1000", http.StatusPartialContent, data[1000:1001]},
		{"bytes=99999999-", http.StatusRequestedRangeNotSatisfiable, nil},
	}
	for _, tt := range tests {
		t.Run(tt.rangeHdr, func(t *testing.T) {
			var hdr []string
			if tt.rangeHdr != "" {
				hdr = []string{"Range", tt.rangeHdr}
			}
			resp, body := get(t, rack.url+"/boot/images/initrd.img", hdr...)
			if resp.StatusCode != tt.wantCode {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.wantCode)
			}
			if tt.want != nil && !bytes.Equal(body, tt.want) {
				t.Fatalf("got %d bytes, want the exact %d-byte slice", len(body), len(tt.want))
			}
		})
	}
	t.Run("multi-range", func(t *testing.T) {
		resp, body := get(t, rack.url+"/boot/images/initrd.img", "Range", "bytes=0-9,100-109")
		if resp.StatusCode != http.StatusPartialContent || !strings.HasPrefix(resp.Header.Get("Content-Type"), "multipart/byteranges") {
			t.Fatalf("status %d type %q, want 206 multipart/byteranges", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if !bytes.Contains(body, data[:10]) || !bytes.Contains(body, data[100:110]) {
			t.Fatal("multipart answer lacks the requested ranges")
		}
	})
}

func TestAssetConfinement(t *testing.T) {
	rack := startRack(t, machines{}, regionlinktest.Start(t, "a").URL)
	secret := filepath.Join(filepath.Dir(rack.dir), "secret")
	if err := os.WriteFile(secret, []byte("TOP-SECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../secret", filepath.Join(rack.dir, "escape")); err != nil {
		t.Fatal(err)
	}
	rack.writeFile(t, "images/vmlinuz", 10)
	tests := []struct {
		requestURI string // sent as is, without client-side cleaning
		wantCode   int
	}{
		{"/boot/escape", http.StatusForbidden},
		{"/boot/..%2fsecret", http.StatusForbidden},
		{"/boot/images%2f..%2f..%2fsecret", http.StatusForbidden},
		{"/boot/" + url.PathEscape(secret), http.StatusForbidden},
		{"/boot/a%00b", http.StatusForbidden},
		{"/boot/images", http.StatusForbidden},
		{"/boot/missing", http.StatusNotFound},
		{"/boot/../secret", http.StatusTemporaryRedirect}, // ServeMux redirects to the cleaned path
	}
	for _, tt := range tests {
		t.Run(tt.requestURI, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, rack.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.URL.Opaque = tt.requestURI
			resp, body := do(t, req)
			if resp.StatusCode != tt.wantCode {
				t.Fatalf("status %d, want %d (body %s)", resp.StatusCode, tt.wantCode, body)
			}
			if bytes.Contains(body, []byte("TOP-SECRET")) {
				t.Fatal("served a file outside the boot directory")
			}
		})
	}
}

// TestFIFOIsRefusedWithoutBlocking: a FIFO in the boot directory (no writer) is refused at
// once instead of hanging the request, and the server then shuts down promptly.
func TestFIFOIsRefusedWithoutBlocking(t *testing.T) {
	rack := startRack(t, machines{}, regionlinktest.Start(t, "a").URL)
	if err := syscall.Mkfifo(filepath.Join(rack.dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(rack.url + "/boot/fifo")
	if err != nil {
		t.Fatalf("GET of a FIFO: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("GET of a FIFO: %d, want 403", resp.StatusCode)
	}
}
