// Package importcfg reads the import configurations the go command gives
// the compiler and the linker: where each package's export data or
// archive is.
package importcfg

import (
	"bufio"
	"os"
	"strings"
)

// Read reads an import configuration: "packagefile path=file" gives a
// package's export data (the compiler's) or its archive (the linker's),
// "importmap src=path" redirects vendored and internal paths.
func Read(path string) (packagefile, importmap map[string]string, err error) {
	packagefile, importmap = map[string]string{}, map[string]string{}
	if path == "" {
		return packagefile, importmap, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		verb, rest, _ := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		key, value, ok := strings.Cut(rest, "=")
		if !ok {
			continue
		}
		switch verb {
		case "packagefile":
			packagefile[key] = value
		case "importmap":
			importmap[key] = value
		}
	}
	return packagefile, importmap, sc.Err()
}
