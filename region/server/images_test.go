package server_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
	"github.com/ironflow/ironflow/region/server"
)

// imageEnv is a server with an images dir, and a client per role.
func imageEnv(t *testing.T, maxBytes int64) (*env, string, map[string]*client.Client) {
	dir := t.TempDir()
	e := newEnv(t, func(c *server.Config) { c.ImagesDir, c.ImageMaxBytes = dir, maxBytes })
	clients := map[string]*client.Client{}
	for role, tok := range e.tokens {
		clients[role] = client.New(e.base, tok)
	}
	return e, dir, clients
}

func hexSHA(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// dirNames lists the files of dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// An upload is stored once per SHA-256 whatever its names; a retried upload is answered with
// the image it stored; only admins write, every role reads the metadata, and only racks and
// admins read the bytes, by range; the file goes with the last name that has it.
func TestImageUploadDedupeRolesAndRange(t *testing.T) {
	_, dir, c := imageEnv(t, 0)
	ctx := context.Background()
	data := bytes.Repeat([]byte("ironflow-image "), 10_000)
	sha := hexSHA(data)
	up := client.ImageUpload{Name: "debian-12", SHA256: sha}

	img, err := c[api.RoleAdmin].UploadImage(ctx, up, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if img.SHA256 != sha || img.Size != int64(len(data)) || img.Arch != "amd64" || img.Format != "raw" || img.Compression != "none" || img.UploadedBy == "" {
		t.Fatalf("stored %+v", img)
	}
	if again, err := c[api.RoleAdmin].UploadImage(ctx, up, bytes.NewReader(data), int64(len(data))); err != nil || again != img {
		t.Fatalf("retried upload = %+v, %v; want %+v", again, err, img)
	}
	if _, err := c[api.RoleAdmin].UploadImage(ctx, client.ImageUpload{Name: "debian-copy", Format: "qcow2"}, bytes.NewReader(data), -1); err != nil {
		t.Fatal(err)
	}
	if got := dirNames(t, filepath.Join(dir, "sha256")); len(got) != 1 || got[0] != sha {
		t.Fatalf("blobs %v, want one named %s", got, sha)
	}
	if _, err := c[api.RoleOperator].UploadImage(ctx, client.ImageUpload{Name: "op"}, bytes.NewReader(data), int64(len(data))); statusOf(err) != http.StatusForbidden {
		t.Errorf("operator upload: %v, want 403", err)
	}
	if err := c[api.RoleOperator].DeleteImage(ctx, "debian-12"); statusOf(err) != http.StatusForbidden {
		t.Errorf("operator delete: %v, want 403", err)
	}
	for _, role := range []string{api.RoleOperator, api.RoleReadonly, api.RoleRack} {
		list, err := c[role].Images(ctx)
		if err != nil || len(list) != 2 || list[0].Name != "debian-12" || list[1].Name != "debian-copy" {
			t.Errorf("%s lists %+v, %v", role, list, err)
		}
	}
	for _, role := range []string{api.RoleOperator, api.RoleReadonly} {
		if _, err := c[role].DownloadImage(ctx, "debian-12", "", 0); statusOf(err) != http.StatusForbidden {
			t.Errorf("%s download: %v, want 403", role, err)
		}
	}
	for _, role := range []string{api.RoleAdmin, api.RoleRack} {
		s, err := c[role].DownloadImage(ctx, "debian-12", sha, 1000)
		if err != nil {
			t.Fatalf("%s download: %v", role, err)
		}
		got, err := io.ReadAll(s.Body)
		s.Body.Close()
		if err != nil || s.StatusCode != http.StatusPartialContent || !bytes.Equal(got, data[1000:]) || s.Header.Get(api.HeaderImageSHA256) != sha {
			t.Errorf("%s ranged download: %d, %d bytes, %v", role, s.StatusCode, len(got), err)
		}
	}
	// If-Range names other bytes: the whole image from 0.
	s, err := c[api.RoleRack].DownloadImage(ctx, "debian-12", strings.Repeat("0", 64), 1000)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, s.Body)
	s.Body.Close()
	if s.StatusCode != http.StatusOK || n != int64(len(data)) {
		t.Errorf("download with a stale If-Range: %d, %d bytes", s.StatusCode, n)
	}

	if err := c[api.RoleAdmin].DeleteImage(ctx, "debian-12"); err != nil {
		t.Fatal(err)
	}
	if got := dirNames(t, filepath.Join(dir, "sha256")); len(got) != 1 {
		t.Fatalf("blobs after deleting one of two names: %v", got)
	}
	if err := c[api.RoleAdmin].DeleteImage(ctx, "debian-copy"); err != nil {
		t.Fatal(err)
	}
	if got := dirNames(t, filepath.Join(dir, "sha256")); len(got) != 0 {
		t.Fatalf("blobs after deleting every name: %v", got)
	}
	if _, err := c[api.RoleReadonly].Image(ctx, "debian-12"); statusOf(err) != http.StatusNotFound {
		t.Errorf("deleted image shown: %v", err)
	}
}

// Bytes that do not hash to the claimed SHA-256, more than the limit, other bytes under a
// taken name, bad options and an upload cut off mid-way store nothing, not even a
// temporary file.
func TestImageUploadRefusalsStoreNothing(t *testing.T) {
	e, dir, c := imageEnv(t, 64<<10)
	ctx := context.Background()
	admin := c[api.RoleAdmin]
	data := bytes.Repeat([]byte{7}, 32<<10)
	nothingStored := func(what string) {
		t.Helper()
		if got := append(dirNames(t, filepath.Join(dir, "sha256")), dirNames(t, filepath.Join(dir, "tmp"))...); len(got) > 0 {
			t.Errorf("%s left %v", what, got)
		}
		if list, err := admin.Images(ctx); err != nil || len(list) > 0 {
			t.Errorf("%s: images %+v, %v", what, list, err)
		}
	}
	for _, tc := range []struct {
		what string
		up   client.ImageUpload
		body []byte
		size int64
		code int
	}{
		{"a mismatching SHA-256", client.ImageUpload{Name: "x", SHA256: hexSHA([]byte("other"))}, data, int64(len(data)), http.StatusUnprocessableEntity},
		{"more than the limit, declared", client.ImageUpload{Name: "x"}, make([]byte, 65<<10), 65 << 10, http.StatusRequestEntityTooLarge},
		{"more than the limit, streamed", client.ImageUpload{Name: "x"}, make([]byte, 65<<10), -1, http.StatusRequestEntityTooLarge},
		{"a bad name", client.ImageUpload{Name: ".hidden"}, data, int64(len(data)), http.StatusUnprocessableEntity},
		{"a bad format", client.ImageUpload{Name: "x", Format: "vmdk"}, data, int64(len(data)), http.StatusUnprocessableEntity},
		{"a bad compression", client.ImageUpload{Name: "x", Compression: "xz"}, data, int64(len(data)), http.StatusUnprocessableEntity},
		{"a SHA-256 in upper case", client.ImageUpload{Name: "x", SHA256: strings.ToUpper(hexSHA(data))}, data, int64(len(data)), http.StatusUnprocessableEntity},
	} {
		_, err := admin.UploadImage(ctx, tc.up, bytes.NewReader(tc.body), tc.size)
		if statusOf(err) != tc.code {
			t.Errorf("%s: %v, want %d", tc.what, err, tc.code)
		}
		nothingStored(tc.what)
	}

	// Cut off: the connection closes after half the declared body.
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "PUT /api/v1/images/cut HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n", e.tokens[api.RoleAdmin], len(data))
	conn.Write(data[:len(data)/2])
	testutil.Eventually(t, 10*time.Second, "the cut upload's temporary file appears", func() bool {
		return len(dirNames(t, filepath.Join(dir, "tmp"))) == 1
	})
	conn.Close()
	testutil.Eventually(t, 10*time.Second, "the cut upload's temporary file is removed", func() bool {
		return len(dirNames(t, filepath.Join(dir, "tmp"))) == 0
	})
	nothingStored("an upload cut off")

	if _, err := admin.UploadImage(ctx, client.ImageUpload{Name: "x"}, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.UploadImage(ctx, client.ImageUpload{Name: "x"}, bytes.NewReader(data[1:]), int64(len(data)-1)); statusOf(err) != http.StatusConflict {
		t.Errorf("other bytes under a taken name: %v, want 409", err)
	}
	if got := dirNames(t, filepath.Join(dir, "tmp")); len(got) > 0 {
		t.Errorf("refused replacement left %v", got)
	}
}

// An image a machine is deployed with is not deleted; the refusal names the machine.
func TestImageDeleteInUseRefused(t *testing.T) {
	e, _, c := imageEnv(t, 0)
	ctx := context.Background()
	data := []byte("a small image")
	img, err := c[api.RoleAdmin].UploadImage(ctx, client.ImageUpload{Name: "small"}, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	e.create(api.KindMachines, map[string]any{"Name": "deployed-1", "Image": api.ImageRef{Name: img.Name, SHA256: img.SHA256}})
	err = c[api.RoleAdmin].DeleteImage(ctx, "small")
	if statusOf(err) != http.StatusConflict || !strings.Contains(err.Error(), "deployed-1") {
		t.Fatalf("delete of an image in use: %v, want 409 naming the machine", err)
	}
	e.do(api.RoleOperator, http.MethodPost, "/api/v1/machines", map[string]any{"Name": "bad", "Image": map[string]any{"Name": "small", "SHA256": "abc"}}).apiError(t, http.StatusUnprocessableEntity)
}

// A region without an images dir keeps metadata routes and answers 503 to bytes.
func TestImagesWithoutDirAnswer503(t *testing.T) {
	e := newEnv(t)
	admin := client.New(e.base, e.tokens[api.RoleAdmin])
	_, err := admin.UploadImage(context.Background(), client.ImageUpload{Name: "x"}, bufio.NewReader(strings.NewReader("x")), 1)
	if statusOf(err) != http.StatusServiceUnavailable || !strings.Contains(err.Error(), "--images-dir") {
		t.Errorf("upload without an images dir: %v", err)
	}
	if list, err := admin.Images(context.Background()); err != nil || len(list) != 0 {
		t.Errorf("list without an images dir: %+v, %v", list, err)
	}
}

// An image whose row outlived its file (a delete that removed the file and then failed to
// commit) gets its bytes back from the same upload again.
func TestRetriedUploadRestoresAMissingFile(t *testing.T) {
	_, dir, c := imageEnv(t, 0)
	ctx := context.Background()
	data := []byte("bytes that went missing")
	up := client.ImageUpload{Name: "lost"}
	img, err := c[api.RoleAdmin].UploadImage(ctx, up, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "sha256", img.SHA256)); err != nil {
		t.Fatal(err)
	}
	if _, err := c[api.RoleRack].DownloadImage(ctx, "lost", "", 0); statusOf(err) != http.StatusNotFound {
		t.Fatalf("download of a row without its file: %v, want 404", err)
	}
	if _, err := c[api.RoleAdmin].UploadImage(ctx, up, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	s, err := c[api.RoleRack].DownloadImage(ctx, "lost", "", 0)
	if err != nil {
		t.Fatalf("download after the upload again: %v", err)
	}
	defer s.Body.Close()
	if got, _ := io.ReadAll(s.Body); !bytes.Equal(got, data) {
		t.Errorf("restored bytes %q", got)
	}
}
