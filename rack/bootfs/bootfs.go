// Package bootfs confines file lookups to a rack's boot directory. TFTP and HTTP boot share it
// so both refuse exactly the same names.
package bootfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Errors returned by Resolve; callers map them to protocol errors.
var (
	ErrInvalidName = errors.New("invalid file name")
	ErrOutside     = errors.New("path escapes the boot directory")
	ErrNotRegular  = errors.New("not a regular file")
)

// Dir is a boot directory. Its root has symlinks resolved so that prefix checks are exact.
type Dir struct {
	root string
	fsys *os.Root
}

// Open opens the boot directory at path.
func Open(path string) (*Dir, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("boot dir %q: %w", path, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("boot dir %q: %w", path, err)
	}
	fsys, err := os.OpenRoot(real)
	if err != nil {
		return nil, fmt.Errorf("boot dir %q: %w", path, err)
	}
	return &Dir{root: real, fsys: fsys}, nil
}

// Root is the absolute, symlink-free path of the boot directory.
func (d *Dir) Root() string { return d.root }

// Close releases the directory handle.
func (d *Dir) Close() error { return d.fsys.Close() }

// Resolve maps a client-supplied name to a path relative to the root. It refuses NUL bytes,
// backslashes, absolute names, ".." elements and names whose symlinks lead outside the root.
func (d *Dir) Resolve(name string) (string, error) {
	switch {
	case name == "":
		return "", fmt.Errorf("%w: empty", ErrInvalidName)
	case strings.ContainsRune(name, 0):
		return "", fmt.Errorf("%w: contains NUL", ErrInvalidName)
	case strings.ContainsRune(name, '\\'):
		return "", fmt.Errorf("%w: contains a backslash", ErrInvalidName)
	case filepath.IsAbs(name):
		return "", fmt.Errorf("%w: %q is absolute", ErrOutside, name)
	}
	for _, elem := range strings.Split(name, "/") {
		if elem == ".." {
			return "", fmt.Errorf("%w: %q contains ..", ErrOutside, name)
		}
	}
	real, err := filepath.EvalSymlinks(filepath.Join(d.root, name))
	if err != nil {
		return "", fmt.Errorf("resolve %q: %w", name, err)
	}
	if real != d.root && !strings.HasPrefix(real, d.root+string(filepath.Separator)) {
		return "", fmt.Errorf("%w: %q resolves to %q", ErrOutside, name, real)
	}
	rel, err := filepath.Rel(d.root, real)
	if err != nil {
		return "", fmt.Errorf("resolve %q: %w", name, err)
	}
	return rel, nil
}

// OpenFile resolves name and opens it read-only. Only regular files are served, and a name
// that is something else (a FIFO, a device, a socket, a directory) is refused without being
// opened for reading: opening a FIFO would block until a writer came. The type is checked
// before the open and again on the open file, which is opened non-blocking so that a FIFO
// swapped in between cannot hang the caller either. The open goes through os.Root as well,
// so a symlink swapped in after Resolve still cannot escape.
func (d *Dir) OpenFile(name string) (*os.File, fs.FileInfo, error) {
	rel, err := d.Resolve(name)
	if err != nil {
		return nil, nil, err
	}
	info, err := d.fsys.Stat(rel)
	if err != nil {
		return nil, nil, fmt.Errorf("stat %q: %w", name, err)
	}
	if !info.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%w: %q is %s", ErrNotRegular, name, kind(info.Mode()))
	}
	f, err := d.fsys.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open %q: %w", name, err)
	}
	if info, err = f.Stat(); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("stat %q: %w", name, err)
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%w: %q is %s", ErrNotRegular, name, kind(info.Mode()))
	}
	return f, info, nil
}

// kind names a non-regular file type for error messages.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file"
}
