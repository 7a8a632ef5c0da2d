package bootfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// DebianIPXEDir is where Debian's ipxe package installs its binaries.
const DebianIPXEDir = "/usr/lib/ipxe"

// IPXEBinaries are the iPXE images the DHCP server hands out by client architecture.
var IPXEBinaries = []string{"undionly.kpxe", "ipxe.pxe", "ipxe.efi", "snponly.efi", "ipxe.lkrn"}

// InstallIPXE copies the iPXE binaries found in srcDir into the boot directory where it has
// none of that name, and returns the names it copied. A file already there is never
// replaced: it may be the operator's own build (with an embedded script or a CA
// certificate). Missing binaries are skipped: the ipxe package is optional on a rack.
// Each copy is written to a temporary file and linked into place, so TFTP never serves a
// partial image and a file that appears meanwhile is not overwritten either.
func (d *Dir) InstallIPXE(srcDir string) ([]string, error) {
	var copied []string
	for _, name := range IPXEBinaries {
		dst := filepath.Join(d.root, name)
		if _, err := os.Lstat(dst); err == nil {
			continue
		}
		err := copyFileNoClobber(filepath.Join(srcDir, name), dst)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return copied, fmt.Errorf("install %s: %w", name, err)
		}
		copied = append(copied, name)
	}
	return copied, nil
}

// copyFileNoClobber copies src to dst unless dst exists (fs.ErrExist).
func copyFileNoClobber(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Link(tmp.Name(), dst) // unlike rename, fails when dst exists
}
