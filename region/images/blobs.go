// Package images keeps the bytes of a region's OS images on its disk, content-addressed: one
// file per SHA-256, written to a temporary file, fsynced, checked against the hash the
// uploader claimed and only then renamed into place, so a reader never finds a partial or
// wrong file under a hash. The metadata (names, formats) is the store's (region/store/images.go).
package images

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Errors of Stage, for the server to answer with.
var (
	ErrTooLarge = errors.New("image too large")
	ErrMismatch = errors.New("SHA-256 mismatch")
)

// staleTemp is the age after which a temporary file is a leftover of a process that died
// mid-upload: an upload in progress writes to its file far more often than that.
const staleTemp = time.Hour

// Blobs is a directory of image files named by their SHA-256.
type Blobs struct {
	dir string
}

// Open opens (creating) the images directory dir and removes the temporary files that
// uploads cut off by a crash left behind.
func Open(dir string) (*Blobs, error) {
	b := &Blobs{dir: dir}
	for _, d := range []string{b.blobDir(), b.tempDir()} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, fmt.Errorf("images dir: %w", err)
		}
	}
	entries, err := os.ReadDir(b.tempDir())
	if err != nil {
		return nil, fmt.Errorf("images dir: %w", err)
	}
	for _, e := range entries {
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > staleTemp {
			_ = os.Remove(filepath.Join(b.tempDir(), e.Name())) // a concurrent Open removed it
		}
	}
	return b, nil
}

func (b *Blobs) blobDir() string { return filepath.Join(b.dir, "sha256") }
func (b *Blobs) tempDir() string { return filepath.Join(b.dir, "tmp") }

// Path is where the image of hash sha lives (sha must be valid hex: api.ValidSHA256).
func (b *Blobs) Path(sha string) string { return filepath.Join(b.blobDir(), sha) }

// Staged is an upload written and fsynced to a temporary file, not yet in place.
type Staged struct {
	b      *Blobs
	temp   string
	SHA256 string
	Size   int64
}

// Stage writes r to a temporary file, at most max bytes, and fsyncs it. A want other than ""
// must be the SHA-256 of what r held (ErrMismatch otherwise). On any error nothing is left.
func (b *Blobs) Stage(r io.Reader, max int64, want string) (_ *Staged, err error) {
	f, err := os.CreateTemp(b.tempDir(), "upload-*")
	if err != nil {
		return nil, fmt.Errorf("stage image: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(r, max+1))
	if err != nil {
		return nil, fmt.Errorf("stage image: %w", err)
	}
	if n > max {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, max)
	}
	got := hex.EncodeToString(h.Sum(nil))
	if want != "" && got != want {
		return nil, fmt.Errorf("%w: the upload's %d bytes hash to %s, not %s", ErrMismatch, n, got, want)
	}
	if err := f.Sync(); err != nil {
		return nil, fmt.Errorf("stage image: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("stage image: %w", err)
	}
	return &Staged{b: b, temp: f.Name(), SHA256: got, Size: n}, nil
}

// Place moves the staged file to its hash's path; when a file is there already (the same
// bytes, uploaded under another name) the staged one is dropped instead.
func (s *Staged) Place() error {
	dst := s.b.Path(s.SHA256)
	if _, err := os.Stat(dst); err == nil {
		return s.Discard()
	}
	if err := os.Rename(s.temp, dst); err != nil {
		return fmt.Errorf("place image %s: %w", s.SHA256, err)
	}
	return syncDir(s.b.blobDir())
}

// Discard removes the staged file, if it is still there.
func (s *Staged) Discard() error {
	if err := os.Remove(s.temp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("discard staged image: %w", err)
	}
	return nil
}

// Open opens the image of hash sha for reading.
func (b *Blobs) Open(sha string) (*os.File, error) {
	f, err := os.Open(b.Path(sha))
	if err != nil {
		return nil, fmt.Errorf("open image %s: %w", sha, err)
	}
	return f, nil
}

// Remove deletes the image of hash sha; one already gone is no error.
func (b *Blobs) Remove(sha string) error {
	if err := os.Remove(b.Path(sha)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove image %s: %w", sha, err)
	}
	return syncDir(b.blobDir())
}

// syncDir makes a rename or removal in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
