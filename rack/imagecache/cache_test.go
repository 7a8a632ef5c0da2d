package imagecache_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/rack/imagecache"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

// region is a stand-in of the region's image routes over real HTTP, with faults.
type region struct {
	mu     sync.Mutex
	images map[string][]byte
	// corrupt is how many answers still flip a byte; cut how many end after half the image.
	corrupt, cut int
	silent       int           // how many answers still send nothing until the client gives up
	gate         chan struct{} // when set, downloads wait for it to close
	downloads    atomic.Int32
	ranges       []string // the Range header of each download
}

func newRegion(t *testing.T, images map[string][]byte) (*region, *client.Client) {
	r := &region{images: images}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/images/{name}", func(w http.ResponseWriter, req *http.Request) {
		img, ok := r.image(req.PathValue("name"))
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(must(json(img)))
	})
	mux.HandleFunc("GET /api/v1/images/{name}/data", r.serveData)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return r, client.New(srv.URL, "token")
}

func (r *region) image(name string) (api.Image, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	data, ok := r.images[name]
	return api.Image{Name: name, Arch: "amd64", Format: "raw", Compression: "none", SHA256: sum(data), Size: int64(len(data)), Uploaded: time.Unix(1e9, 0)}, ok
}

func (r *region) serveData(w http.ResponseWriter, req *http.Request) {
	r.downloads.Add(1)
	img, _ := r.image(req.PathValue("name"))
	r.mu.Lock()
	gate := r.gate
	r.ranges = append(r.ranges, req.Header.Get("Range"))
	data := bytes.Clone(r.images[req.PathValue("name")])
	corrupt, cut, silent := r.corrupt > 0, r.cut > 0, r.silent > 0
	r.corrupt, r.cut, r.silent = max(r.corrupt-1, 0), max(r.cut-1, 0), max(r.silent-1, 0)
	r.mu.Unlock()
	if silent {
		<-req.Context().Done()
		return
	}
	if gate != nil {
		<-gate
	}
	if corrupt {
		data[len(data)/3] ^= 0xff
	}
	if cut {
		w.Header().Set(api.HeaderImageSHA256, img.SHA256)
		w.Header().Set("Content-Length", itoa(len(data)))
		w.WriteHeader(http.StatusOK)
		w.Write(data[:len(data)/2])
		panic(http.ErrAbortHandler) // the connection breaks mid-answer
	}
	api.ServeImage(w, req, img, bytes.NewReader(data))
}

func openCache(t *testing.T, src imagecache.Source, maxBytes int64) (*imagecache.Cache, string) {
	dir := t.TempDir()
	c, err := imagecache.Open(imagecache.Config{Dir: dir, MaxBytes: maxBytes, Source: src, StallTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c, dir
}

// readImage opens name from c and returns its bytes.
func readImage(t *testing.T, c *imagecache.Cache, name string) []byte {
	t.Helper()
	h, err := c.Open(context.Background(), name)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	defer h.Close()
	data, err := io.ReadAll(h)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func files(t *testing.T, dir string) []string {
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

// An image is fetched once, verified and then served from the disk.
func TestImageFetchedOnceThenServedFromCache(t *testing.T) {
	data := pattern(300 << 10)
	r, src := newRegion(t, map[string][]byte{"deb": data})
	c, dir := openCache(t, src, 1<<20)
	for range 3 {
		if got := readImage(t, c, "deb"); !bytes.Equal(got, data) {
			t.Fatal("cached image differs from the region's")
		}
	}
	if n := r.downloads.Load(); n != 1 {
		t.Errorf("%d downloads, want 1", n)
	}
	if got := files(t, filepath.Join(dir, "sha256")); len(got) != 1 || got[0] != sum(data) {
		t.Errorf("cache files %v", got)
	}
}

// A download whose bytes do not hash to the image's SHA-256 is fetched again from byte 0; one
// that never verifies is refused and leaves no file, partial or whole.
func TestCorruptedDownloadFetchedAgain(t *testing.T) {
	data := pattern(200 << 10)
	r, src := newRegion(t, map[string][]byte{"deb": data})
	r.corrupt = 1
	c, dir := openCache(t, src, 1<<20)
	if got := readImage(t, c, "deb"); !bytes.Equal(got, data) {
		t.Fatal("served a corrupted image")
	}
	if n := r.downloads.Load(); n != 2 || r.ranges[1] != "" {
		t.Errorf("%d downloads with ranges %q, want a second whole one", n, r.ranges)
	}

	r.mu.Lock()
	r.images["bad"] = pattern(100 << 10)
	r.corrupt = 100
	r.mu.Unlock()
	_, err := c.Open(context.Background(), "bad")
	if !errors.Is(err, imagecache.ErrCorrupt) {
		t.Fatalf("always corrupted: %v, want ErrCorrupt", err)
	}
	if got := files(t, filepath.Join(dir, "sha256")); len(got) != 1 {
		t.Errorf("cache files after a refused image: %v", got)
	}
	if got := files(t, filepath.Join(dir, "partial")); len(got) != 0 {
		t.Errorf("partial files after a refused image: %v", got)
	}
	if c.Used() != int64(len(data)) {
		t.Errorf("Used %d after a refused image, want %d", c.Used(), len(data))
	}
}

// A connection broken mid-download is resumed with a Range request from the byte it reached.
func TestBrokenDownloadResumesWithRange(t *testing.T) {
	data := pattern(400 << 10)
	r, src := newRegion(t, map[string][]byte{"deb": data})
	r.cut = 1
	c, _ := openCache(t, src, 1<<20)
	if got := readImage(t, c, "deb"); !bytes.Equal(got, data) {
		t.Fatal("resumed image differs")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.ranges) != 2 || r.ranges[0] != "" || r.ranges[1] != "bytes="+itoa(len(data)/2)+"-" {
		t.Errorf("ranges %q, want a whole download then bytes=%d-", r.ranges, len(data)/2)
	}
}

// The cache holds at most its bound: the least recently used idle image goes first, an image
// being served is never evicted (a new one that needs its room is refused until it is free),
// and an image larger than the whole cache is refused.
func TestLRUEvictionKeepsTheBoundAndImagesInUse(t *testing.T) {
	const size = 100 << 10
	a, b, cc, big := pattern(size), pattern(size+1), pattern(size+2), pattern(400<<10)
	r, src := newRegion(t, map[string][]byte{"a": a, "b": b, "c": cc, "big": big})
	c, dir := openCache(t, src, 250<<10)
	readImage(t, c, "a")
	readImage(t, c, "b")
	readImage(t, c, "a") // b is now the least recently used
	readImage(t, c, "c")
	if got := files(t, filepath.Join(dir, "sha256")); len(got) != 2 || contains(got, sum(b)) {
		t.Errorf("after c: files %v, want a and c (b evicted)", got)
	}
	if c.Used() > 250<<10 {
		t.Errorf("Used %d over the bound", c.Used())
	}

	ha, err := c.Open(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	hc, err := c.Open(context.Background(), "c")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Open(context.Background(), "b"); !errors.Is(err, imagecache.ErrFull) {
		t.Fatalf("b while a and c are served: %v, want ErrFull", err)
	}
	// The open image still reads whole.
	if got, _ := io.ReadAll(ha); !bytes.Equal(got, a) {
		t.Error("an image in use changed")
	}
	ha.Close()
	hc.Close()
	if got := readImage(t, c, "b"); !bytes.Equal(got, b) {
		t.Error("b after its room was freed")
	}
	if _, err := c.Open(context.Background(), "big"); !errors.Is(err, imagecache.ErrFull) {
		t.Errorf("an image larger than the cache: %v, want ErrFull", err)
	}
	before := r.downloads.Load()
	if got := readImage(t, c, "b"); !bytes.Equal(got, b) || r.downloads.Load() != before {
		t.Error("a cached image was fetched again")
	}
}

// Machines asking for the same image at once share one download, and none of them gets a
// byte before it is whole and verified.
func TestConcurrentRequestsFetchOnceAndNeverSeeAPartialFile(t *testing.T) {
	data := pattern(500 << 10)
	r, src := newRegion(t, map[string][]byte{"deb": data})
	r.gate = make(chan struct{})
	c, dir := openCache(t, src, 1<<20)

	const clients = 20
	results := make(chan error, clients)
	for range clients {
		go func() {
			h, err := c.Open(context.Background(), "deb")
			if err != nil {
				results <- err
				return
			}
			defer h.Close()
			got, err := io.ReadAll(h)
			if err == nil && !bytes.Equal(got, data) {
				err = errors.New("wrong bytes")
			}
			results <- err
		}()
	}
	testutil.Eventually(t, 10*time.Second, "the download starts", func() bool { return r.downloads.Load() == 1 })
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if h, err := c.Open(short, "deb"); err == nil {
		h.Close()
		t.Fatal("an image was served while its download was in flight")
	}
	if got := files(t, filepath.Join(dir, "sha256")); len(got) != 0 {
		t.Errorf("a file is in place before the download ended: %v", got)
	}
	close(r.gate)
	for range clients {
		if err := <-results; err != nil {
			t.Error(err)
		}
	}
	if n := r.downloads.Load(); n != 1 {
		t.Errorf("%d downloads for %d concurrent requests, want 1", n, clients)
	}
}

// The cache's images survive a restart: they are not fetched again.
func TestCachedImagesSurviveReopen(t *testing.T) {
	data := pattern(64 << 10)
	r, src := newRegion(t, map[string][]byte{"deb": data})
	c, dir := openCache(t, src, 1<<20)
	readImage(t, c, "deb")
	again, err := imagecache.Open(imagecache.Config{Dir: dir, MaxBytes: 1 << 20, Source: src})
	if err != nil {
		t.Fatal(err)
	}
	if got := readImage(t, again, "deb"); !bytes.Equal(got, data) || r.downloads.Load() != 1 || again.Used() != int64(len(data)) {
		t.Errorf("after reopening: %d downloads, Used %d", r.downloads.Load(), again.Used())
	}
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// flakyMetadata fails the metadata lookups with a 503 once failing is set.
type flakyMetadata struct {
	imagecache.Source
	failing atomic.Bool
}

func (f *flakyMetadata) Image(ctx context.Context, name string) (api.Image, error) {
	if f.failing.Load() {
		return api.Image{}, &client.APIError{StatusCode: http.StatusServiceUnavailable, Message: "database unavailable"}
	}
	return f.Source.Image(ctx, name)
}

// A region that answers 5xx (its database down) does not stop the rack from serving what it
// has cached, under the metadata it last saw.
func TestCachedImageServedWhileTheRegionFails(t *testing.T) {
	data := pattern(32 << 10)
	_, src := newRegion(t, map[string][]byte{"deb": data})
	flaky := &flakyMetadata{Source: src}
	dir := t.TempDir()
	c, err := imagecache.Open(imagecache.Config{Dir: dir, MaxBytes: 1 << 20, Source: flaky, MetadataTTL: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	readImage(t, c, "deb")
	flaky.failing.Store(true)
	if got := readImage(t, c, "deb"); !bytes.Equal(got, data) {
		t.Error("cached image differs while the region fails")
	}
}

// A region that accepts the download and never answers is given up on after the stall
// timeout, and the next attempt fetches the image.
func TestSilentRegionIsRetriedAfterTheStallTimeout(t *testing.T) {
	data := pattern(16 << 10)
	r, src := newRegion(t, map[string][]byte{"deb": data})
	r.silent = 1
	c, err := imagecache.Open(imagecache.Config{Dir: t.TempDir(), MaxBytes: 1 << 20, Source: src, StallTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	h, err := c.Open(ctx, "deb")
	if err != nil {
		t.Fatalf("open after a silent answer: %v", err)
	}
	defer h.Close()
	if got, _ := io.ReadAll(h); !bytes.Equal(got, data) || r.downloads.Load() != 2 {
		t.Errorf("%d downloads, bytes equal %v", r.downloads.Load(), bytes.Equal(got, data))
	}
}

// A cached file removed behind the cache's back is fetched again, not refused forever.
func TestRemovedCacheFileIsFetchedAgain(t *testing.T) {
	data := pattern(16 << 10)
	r, src := newRegion(t, map[string][]byte{"deb": data})
	c, dir := openCache(t, src, 1<<20)
	readImage(t, c, "deb")
	if err := os.Remove(filepath.Join(dir, "sha256", sum(data))); err != nil {
		t.Fatal(err)
	}
	if got := readImage(t, c, "deb"); !bytes.Equal(got, data) || r.downloads.Load() != 2 || c.Used() != int64(len(data)) {
		t.Errorf("after the file was removed: %d downloads, Used %d", r.downloads.Load(), c.Used())
	}
}
