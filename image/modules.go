package image

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// DefaultModules are the drivers of the machines Ironflow commissions: virtual machines'
// NICs and disks, the common server NICs and storage controllers, and the in-band BMC
// (/dev/ipmi0). Their dependencies come with them.
var DefaultModules = []string{
	"virtio_pci", "virtio_net", "virtio_blk", "virtio_scsi",
	"e1000", "e1000e", "igb", "ixgbe", "i40e", "mlx5_core",
	"ahci", "nvme", "megaraid_sas", "sd_mod",
	"ipmi_si", "ipmi_devintf",
}

// moduleName is a module's name as the kernel spells it: file name without .ko, '-' as '_'.
func moduleName(file string) string {
	return strings.ReplaceAll(strings.TrimSuffix(path.Base(file), ".ko"), "-", "_")
}

// kernelModules is one kernel release's modules directory (lib/modules/<release>).
type kernelModules struct {
	dir     string
	files   map[string]string // module name -> path relative to dir
	builtin map[string]bool
}

func readKernelModules(dir string) (*kernelModules, error) {
	k := &kernelModules{dir: dir, files: map[string]string{}, builtin: map[string]bool{}}
	err := filepath.WalkDir(filepath.Join(dir, "kernel"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".ko") {
			rel, err := filepath.Rel(dir, p)
			if err != nil {
				return err
			}
			k.files[moduleName(p)] = filepath.ToSlash(rel)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list kernel modules: %w", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "modules.builtin"))
	if err != nil {
		return nil, fmt.Errorf("kernel modules: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			k.builtin[moduleName(line)] = true
		}
	}
	return k, nil
}

// depends reads the module's own list of the modules it needs (its .modinfo "depends=").
func (k *kernelModules) depends(name string) ([]string, error) {
	f, err := elf.Open(filepath.Join(k.dir, k.files[name]))
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", name, err)
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("module %s: no .modinfo section", name)
	}
	info, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("module %s: .modinfo: %w", name, err)
	}
	for field := range bytes.SplitSeq(info, []byte{0}) {
		if list, ok := bytes.CutPrefix(field, []byte("depends=")); ok && len(list) > 0 {
			var deps []string
			for d := range strings.SplitSeq(string(list), ",") {
				deps = append(deps, moduleName(d))
			}
			sort.Strings(deps)
			return deps, nil
		}
	}
	return nil, nil
}

// loadOrder returns the module files (relative to k.dir) that loading wanted needs, every
// module after those it depends on. Built-in modules need no file; a module the kernel has
// neither as a file nor built in is an error, so a misspelt name does not go unnoticed.
func (k *kernelModules) loadOrder(wanted []string) ([]string, error) {
	var order []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(name, from string) error
	visit = func(name, from string) error {
		switch {
		case state[name] == 2:
			return nil
		case state[name] == 1:
			return fmt.Errorf("module %s: circular dependency through %s", name, from)
		case k.files[name] == "" && k.builtin[name]:
			state[name] = 2
			return nil
		case k.files[name] == "":
			if from != "" {
				return fmt.Errorf("module %s, needed by %s, is not in the kernel", name, from)
			}
			return fmt.Errorf("module %s is not in the kernel", name)
		}
		state[name] = 1
		deps, err := k.depends(name)
		if err != nil {
			return err
		}
		for _, d := range deps {
			if err := visit(d, name); err != nil {
				return err
			}
		}
		state[name] = 2
		order = append(order, k.files[name])
		return nil
	}
	for _, w := range wanted {
		if err := visit(moduleName(w), ""); err != nil {
			return nil, err
		}
	}
	return order, nil
}
