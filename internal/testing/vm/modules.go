package vm

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

// guestModules are the modules the init loads, besides what they depend
// on: Debian builds virtio's PCI transport and 9p as modules.
var guestModules = []string{"virtio_pci", "9pnet_virtio", "9p"}

// moduleOrder returns the module files under modDir (a kernel's
// lib/modules/RELEASE) that load wants, with what they depend on, each
// after its dependencies. It reads the dependencies from the modules'
// .modinfo sections, as depmod would, so the host needs no kmod and the
// modules may be of any architecture.
func moduleOrder(modDir string, load []string) ([]string, error) {
	paths := map[string]string{}
	modDir, err := filepath.EvalSymlinks(modDir)
	if err != nil {
		return nil, err
	}
	err = filepath.WalkDir(modDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name, ok := strings.CutSuffix(d.Name(), ".ko"); ok && !d.IsDir() {
			paths[canonicalModule(name)] = path
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var order []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(name string) error
	visit = func(name string) error {
		name = canonicalModule(name)
		switch state[name] {
		case 1:
			return fmt.Errorf("module %s depends on itself", name)
		case 2:
			return nil
		}
		path, ok := paths[name]
		if !ok {
			// Built into the kernel, or absent: the mount that needs it
			// says which.
			state[name] = 2
			return nil
		}
		state[name] = 1
		deps, err := moduleDepends(path)
		if err != nil {
			return err
		}
		for _, d := range deps {
			if err := visit(d); err != nil {
				return err
			}
		}
		state[name] = 2
		order = append(order, path)
		return nil
	}
	for _, m := range load {
		if _, ok := paths[canonicalModule(m)]; !ok {
			continue
		}
		if err := visit(m); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// canonicalModule spells a module name as the kernel does: '-' and '_'
// are the same in module names.
func canonicalModule(name string) string {
	return strings.ReplaceAll(name, "-", "_")
}

// moduleDepends reads the depends= field of a module's .modinfo section.
func moduleDepends(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s := f.Section(".modinfo")
	if s == nil {
		return nil, fmt.Errorf("%s: no .modinfo section", path)
	}
	info, err := s.Data()
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	for _, field := range bytes.Split(info, []byte{0}) {
		if deps, ok := bytes.CutPrefix(field, []byte("depends=")); ok {
			if len(deps) == 0 {
				return nil, nil
			}
			return strings.Split(string(deps), ","), nil
		}
	}
	return nil, nil
}
