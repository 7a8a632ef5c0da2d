package image

import (
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/cavaliergopher/cpio"
)

// entry is one file or directory of the initramfs: its content is data, or the file at src.
type entry struct {
	name string // absolute path inside the image
	mode cpio.FileMode
	data []byte
	src  string
}

// archive is the initramfs being put together; written, it is the same bytes for the same
// entries whatever order they were added in.
type archive struct{ entries map[string]entry }

func newArchive() *archive { return &archive{entries: map[string]entry{}} }

// addFile adds the file at src (a host path) as name, with mode's permission bits.
func (a *archive) addFile(name, src string, perm os.FileMode) {
	a.add(entry{name: name, mode: cpio.TypeReg | cpio.FileMode(perm.Perm()), src: src})
}

// addData adds data as the file name.
func (a *archive) addData(name string, data []byte, perm os.FileMode) {
	a.add(entry{name: name, mode: cpio.TypeReg | cpio.FileMode(perm.Perm()), data: data})
}

// addDir adds an empty directory.
func (a *archive) addDir(name string) {
	a.add(entry{name: name, mode: cpio.TypeDir | 0o755})
}

// add records e and the directories above it.
func (a *archive) add(e entry) {
	a.entries[e.name] = e
	for dir := path.Dir(e.name); dir != "/"; dir = path.Dir(dir) {
		if _, ok := a.entries[dir]; !ok {
			a.entries[dir] = entry{name: dir, mode: cpio.TypeDir | 0o755}
		}
	}
}

// writeTo writes the archive as a gzip-compressed newc cpio, what the kernel unpacks as its
// initramfs. Reproducible: entries sorted by path (so a directory precedes its contents),
// every mtime mtime, owner root, inode numbers by position, and a gzip header without a
// name or time.
func (a *archive) writeTo(w io.Writer, mtime time.Time) error {
	names := make([]string, 0, len(a.entries))
	for n := range a.entries {
		names = append(names, n)
	}
	sort.Strings(names)
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	cw := cpio.NewWriter(zw)
	for _, n := range names {
		if err := writeEntry(cw, a.entries[n], mtime); err != nil {
			return fmt.Errorf("initramfs %s: %w", n, err)
		}
	}
	if err := cw.Close(); err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	return zw.Close()
}

func writeEntry(cw *cpio.Writer, e entry, mtime time.Time) error {
	hdr := &cpio.Header{Name: strings.TrimPrefix(e.name, "/"), Mode: e.mode, ModTime: mtime, Links: 1}
	if e.mode.IsDir() {
		hdr.Links = 2
		return cw.WriteHeader(hdr)
	}
	var content io.Reader
	switch {
	case e.src != "":
		f, err := os.Open(e.src)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		hdr.Size, content = st.Size(), f
	default:
		hdr.Size, content = int64(len(e.data)), strings.NewReader(string(e.data))
	}
	if err := cw.WriteHeader(hdr); err != nil {
		return err
	}
	n, err := io.Copy(cw, content)
	if err == nil && n != hdr.Size {
		err = fmt.Errorf("wrote %d of %d bytes (the file changed while it was read)", n, hdr.Size)
	}
	return err
}
