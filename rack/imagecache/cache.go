// Package imagecache is a rack's bounded cache of its region's OS images: an image is fetched
// on its first use (once, however many machines ask at the same time), resumed with Range when
// the connection breaks, checked against its SHA-256 before it is served, and the least
// recently used images not being served are evicted to make room. Only whole, verified files
// are ever served: a download in progress lives in a partial file until it is renamed.
package imagecache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/ironflow/ironflow/internal/backoff"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

// Source is the region's images API (*client.Client).
type Source interface {
	Image(ctx context.Context, name string) (api.Image, error)
	DownloadImage(ctx context.Context, name, sha string, offset int64) (client.Stream, error)
}

// Errors of Open.
var (
	// ErrFull: the image does not fit beside the images being served (or at all); try later.
	ErrFull = errors.New("image cache full")
	// ErrCorrupt: every download of the image hashed to something else than its SHA-256.
	ErrCorrupt = errors.New("image download corrupted")
)

// Config configures a Cache. Zero fields but Dir, MaxBytes and Source take defaults.
type Config struct {
	Dir      string // the cache's own directory; its files are the cache's
	MaxBytes int64  // the bound of the cached and in-flight images' sizes together
	Source   Source
	Logger   *slog.Logger
	// Attempts is how often one fetch tries, resuming or (after a hash mismatch) restarting
	// the download (default 4).
	Attempts int
	// StallTimeout ends an attempt that receives no byte for this long (default 1m).
	StallTimeout time.Duration
	// MetadataTTL is how long an image's metadata is used before the region is asked again
	// (default 10s); when the region cannot answer, the last metadata is used.
	MetadataTTL time.Duration
}

// Cache is a bounded directory of images named by SHA-256. It is safe for concurrent use.
type Cache struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	entries map[string]*entry  // by SHA-256: cached images and fetches in flight
	total   int64              // the sizes of every entry
	meta    map[string]metaHit // by image name
}

// entry is one image's room in the cache: a file being fetched (fetch not nil) or a cached one.
type entry struct {
	size    int64
	used    time.Time
	readers int    // Handles open on the file: never evicted while > 0
	fetch   *fetch // nil once cached
}

// fetch is one download in flight; everyone who asks for the image meanwhile waits for it.
type fetch struct {
	done chan struct{}
	err  error
}

type metaHit struct {
	img  api.Image
	when time.Time
}

// Open opens (creating) the cache in cfg.Dir: the images cached there count against
// MaxBytes, least recently used first by their modification time; partial downloads of an
// earlier process are removed.
func Open(cfg Config) (*Cache, error) {
	switch {
	case cfg.Dir == "":
		return nil, errors.New("imagecache: a directory is required")
	case cfg.MaxBytes <= 0:
		return nil, errors.New("imagecache: a positive size bound is required")
	case cfg.Source == nil:
		return nil, errors.New("imagecache: a source is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 4
	}
	if cfg.StallTimeout <= 0 {
		cfg.StallTimeout = time.Minute
	}
	if cfg.MetadataTTL <= 0 {
		cfg.MetadataTTL = 10 * time.Second
	}
	c := &Cache{cfg: cfg, log: cfg.Logger.With("component", "imagecache"), entries: map[string]*entry{}, meta: map[string]metaHit{}}
	if err := os.RemoveAll(c.partialDir()); err != nil {
		return nil, fmt.Errorf("imagecache: %w", err)
	}
	for _, d := range []string{c.blobDir(), c.partialDir()} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, fmt.Errorf("imagecache: %w", err)
		}
	}
	files, err := os.ReadDir(c.blobDir())
	if err != nil {
		return nil, fmt.Errorf("imagecache: %w", err)
	}
	for _, f := range files {
		info, err := f.Info()
		if err != nil || api.ValidSHA256(f.Name()) != nil || !info.Mode().IsRegular() {
			continue
		}
		c.entries[f.Name()] = &entry{size: info.Size(), used: info.ModTime()}
		c.total += info.Size()
	}
	return c, nil
}

func (c *Cache) blobDir() string            { return filepath.Join(c.cfg.Dir, "sha256") }
func (c *Cache) partialDir() string         { return filepath.Join(c.cfg.Dir, "partial") }
func (c *Cache) blobPath(sha string) string { return filepath.Join(c.blobDir(), sha) }

// Used is the bytes the cache holds, images being fetched included.
func (c *Cache) Used() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// Handle is an open cached image; Close it when served.
type Handle struct {
	*os.File
	Image api.Image
	once  sync.Once
	c     *Cache
}

// Close closes the file and lets the image be evicted again.
func (h *Handle) Close() error {
	err := h.File.Close()
	h.once.Do(func() { h.c.release(h.Image.SHA256) })
	return err
}

// Open returns the image called name, fetching it first when the cache lacks it.
func (c *Cache) Open(ctx context.Context, name string) (*Handle, error) {
	img, err := c.lookup(ctx, name)
	if err != nil {
		return nil, err
	}
	for {
		c.mu.Lock()
		e := c.entries[img.SHA256]
		switch {
		case e != nil && e.fetch == nil:
			e.readers++
			e.used = time.Now()
			c.mu.Unlock()
			f, err := os.Open(c.blobPath(img.SHA256))
			if errors.Is(err, os.ErrNotExist) {
				c.forget(img.SHA256) // removed behind the cache's back: fetch it again
				continue
			}
			if err != nil {
				c.release(img.SHA256)
				return nil, fmt.Errorf("open cached image %s: %w", name, err)
			}
			return &Handle{File: f, Image: img, c: c}, nil
		case e != nil:
			f := e.fetch // run clears it once done
			c.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if f.err != nil {
				return nil, f.err
			}
		default:
			f, err := c.reserve(img)
			c.mu.Unlock()
			if err != nil {
				return nil, err
			}
			// The fetch outlives the request that started it: the others waiting for it,
			// and the next machine, want the image too.
			go c.run(context.WithoutCancel(ctx), img, f)
		}
	}
}

// lookup returns the region's metadata of name, at most MetadataTTL old, or the last known
// when the region cannot answer (unreachable, or failing with a 5xx).
func (c *Cache) lookup(ctx context.Context, name string) (api.Image, error) {
	c.mu.Lock()
	hit, ok := c.meta[name]
	c.mu.Unlock()
	if ok && time.Since(hit.when) < c.cfg.MetadataTTL {
		return hit.img, nil
	}
	img, err := c.cfg.Source.Image(ctx, name)
	var apiErr *client.APIError
	switch {
	case err == nil:
		if err := api.ValidSHA256(img.SHA256); err != nil || img.Name != name || img.Size < 0 {
			return api.Image{}, fmt.Errorf("region's image %s: %+v is not an image", name, img)
		}
		c.mu.Lock()
		c.meta[name] = metaHit{img: img, when: time.Now()}
		c.mu.Unlock()
		return img, nil
	case errors.As(err, &apiErr) && apiErr.Permanent():
		c.mu.Lock()
		delete(c.meta, name) // deleted or no longer the rack's to read
		c.mu.Unlock()
		return api.Image{}, err
	case ok:
		c.log.Warn("region unreachable, serving the image as last known", "image", name, "sha256", hit.img.SHA256, "error", err)
		return hit.img, nil
	}
	return api.Image{}, err
}

// reserve makes room for img (evicting the least recently used idle images) and records its
// fetch; c.mu is held.
func (c *Cache) reserve(img api.Image) (*fetch, error) {
	if img.Size > c.cfg.MaxBytes {
		return nil, fmt.Errorf("%w: image %s is %d bytes, more than the whole cache (%d)", ErrFull, img.Name, img.Size, c.cfg.MaxBytes)
	}
	if c.total+img.Size > c.cfg.MaxBytes {
		var idle []string
		for sha, e := range c.entries {
			if e.fetch == nil && e.readers == 0 {
				idle = append(idle, sha)
			}
		}
		sort.Slice(idle, func(i, j int) bool { return c.entries[idle[i]].used.Before(c.entries[idle[j]].used) })
		free := c.cfg.MaxBytes - c.total
		n := 0
		for n < len(idle) && free < img.Size {
			free += c.entries[idle[n]].size
			n++
		}
		if free < img.Size {
			return nil, fmt.Errorf("%w: image %s needs %d bytes and only %d are not being served or fetched", ErrFull, img.Name, img.Size, free)
		}
		for _, sha := range idle[:n] {
			if err := os.Remove(c.blobPath(sha)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("evict image %s: %w", sha, err)
			}
			c.total -= c.entries[sha].size
			delete(c.entries, sha)
			c.log.Info("image evicted", "sha256", sha, "for", img.Name)
		}
	}
	f := &fetch{done: make(chan struct{})}
	c.entries[img.SHA256] = &entry{size: img.Size, used: time.Now(), fetch: f}
	c.total += img.Size
	return f, nil
}

// run fetches img and settles its entry: cached, or gone with its room.
func (c *Cache) run(ctx context.Context, img api.Image, f *fetch) {
	start := time.Now()
	err := c.download(ctx, img)
	c.mu.Lock()
	if err != nil {
		c.total -= img.Size
		delete(c.entries, img.SHA256)
	} else {
		c.entries[img.SHA256].fetch = nil
	}
	f.err = err
	close(f.done)
	c.mu.Unlock()
	if err != nil {
		c.log.Warn("image fetch failed", "image", img.Name, "sha256", img.SHA256, "error", err)
		return
	}
	c.log.Info("image fetched", "image", img.Name, "sha256", img.SHA256, "bytes", img.Size, "took", time.Since(start))
}

// download writes img to its partial file, resuming it after a broken connection and
// restarting it after a hash mismatch, and renames it into place once verified.
func (c *Cache) download(ctx context.Context, img api.Image) error {
	partial := filepath.Join(c.partialDir(), img.SHA256)
	file, err := os.OpenFile(partial, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return fmt.Errorf("image %s: %w", img.Name, err)
	}
	defer os.Remove(partial) // a no-op once renamed
	defer file.Close()
	w := &partialFile{f: file, h: sha256.New()}
	wait := backoff.Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second, Jitter: true}
	var last error
	for attempt := 1; attempt <= c.cfg.Attempts; attempt++ {
		if attempt > 1 {
			if err := backoff.Sleep(ctx, wait.Next()); err != nil {
				return err
			}
		}
		err := c.attempt(ctx, img, w)
		if err == nil && w.n == img.Size {
			got := hex.EncodeToString(w.h.Sum(nil))
			if got == img.SHA256 {
				return c.place(img, file, partial)
			}
			err = fmt.Errorf("%w: %d bytes hash to %s, not %s", ErrCorrupt, w.n, got, img.SHA256)
			c.log.Warn("image download corrupted, fetching it again", "image", img.Name, "attempt", attempt, "error", err)
			if err := w.reset(); err != nil {
				return err
			}
		}
		last = err
		if errors.Is(err, errChanged) || errors.Is(err, errDisk) || permanent(err) {
			return err
		}
		if err != nil && !errors.Is(err, ErrCorrupt) {
			c.log.Info("image download broken, resuming", "image", img.Name, "at", w.n, "attempt", attempt, "error", err)
		}
	}
	return fmt.Errorf("image %s: %d attempts failed: %w", img.Name, c.cfg.Attempts, last)
}

// errDisk: the rack's own disk failed a write, after which the partial file's length is
// unknown: the fetch ends rather than resume at a wrong offset.
var errDisk = errors.New("cache disk write failed")

// errChanged: the region's image of that name has other bytes now than the fetch started for.
var errChanged = errors.New("the region's image changed during the download")

func permanent(err error) bool {
	var apiErr *client.APIError
	return errors.As(err, &apiErr) && apiErr.Permanent()
}

// attempt downloads the rest of img into w, from w.n on.
func (c *Cache) attempt(ctx context.Context, img api.Image, w *partialFile) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A region that stops sending, before its answer's header or in its body, ends the
	// attempt; the next resumes.
	stall := time.AfterFunc(c.cfg.StallTimeout, cancel)
	defer stall.Stop()
	s, err := c.cfg.Source.DownloadImage(ctx, img.Name, img.SHA256, w.n)
	if err != nil {
		return err
	}
	defer s.Body.Close()
	if got := s.Header.Get(api.HeaderImageSHA256); got != img.SHA256 {
		return fmt.Errorf("image %s: %w (SHA-256 %s, not %s)", img.Name, errChanged, got, img.SHA256)
	}
	if s.StatusCode != http.StatusPartialContent && w.n > 0 {
		if err := w.reset(); err != nil { // the region sent the whole image
			return err
		}
	}
	stall.Reset(c.cfg.StallTimeout)
	buf := make([]byte, 256<<10)
	for w.n < img.Size {
		n, err := s.Body.Read(buf[:min(int64(len(buf)), img.Size-w.n)])
		if n > 0 {
			stall.Reset(c.cfg.StallTimeout)
			if err := w.write(buf[:n]); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("image %s at byte %d: %w", img.Name, w.n, err)
		}
	}
	if w.n < img.Size {
		return fmt.Errorf("image %s: the answer ended at byte %d of %d", img.Name, w.n, img.Size)
	}
	return nil
}

// place makes the verified partial file durable and renames it to its hash.
func (c *Cache) place(img api.Image, file *os.File, partial string) error {
	if err := file.Sync(); err != nil {
		return fmt.Errorf("image %s: %w", img.Name, err)
	}
	if err := os.Rename(partial, c.blobPath(img.SHA256)); err != nil {
		return fmt.Errorf("image %s: %w", img.Name, err)
	}
	d, err := os.Open(c.blobDir())
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// release ends one reader of the image of hash sha.
func (c *Cache) release(sha string) {
	now := time.Now()
	c.mu.Lock()
	e := c.entries[sha]
	if e != nil && e.readers > 0 {
		e.readers--
		e.used = now
	}
	c.mu.Unlock()
	// The file's time is its place in the eviction order when the rack starts again.
	if e != nil {
		_ = os.Chtimes(c.blobPath(sha), now, now) // evicted meanwhile: nothing to order
	}
}

// forget drops the entry of a cached file that is gone. Handles still open read the
// unlinked file through their descriptors; their Close finds no entry to release.
func (c *Cache) forget(sha string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entries[sha]; e != nil && e.fetch == nil {
		c.total -= e.size
		delete(c.entries, sha)
	}
}

// partialFile is a download's file and the hash of what it holds.
type partialFile struct {
	f *os.File
	h hash.Hash
	n int64
}

func (p *partialFile) write(b []byte) error {
	if _, err := p.f.Write(b); err != nil {
		return fmt.Errorf("%w: %w", errDisk, err)
	}
	p.h.Write(b)
	p.n += int64(len(b))
	return nil
}

// reset empties the file, for a download that starts again from byte 0.
func (p *partialFile) reset() error {
	if err := p.f.Truncate(0); err != nil {
		return err
	}
	if _, err := p.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	p.h.Reset()
	p.n = 0
	return nil
}
