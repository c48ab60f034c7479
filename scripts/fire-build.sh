# fire-build.sh is sourced by the benchmark scripts that build
# scripts/testdata/fire: with root (this tree), src (the fire program's
# directory) and OUT set, build NAME TREE builds it into OUT/NAME.

# build NAME TREE [RULES] builds the tools of TREE and the fire program
# with them into OUT/NAME, with the rules file RULES (default
# src/rules.yml).
build() {
	local dir=$OUT/$1 tree=$2 rules=${3:-$src/rules.yml}
	mkdir -p "$dir/mod"
	(cd "$tree" && go build -o "$dir/" ./cmd/usdtgen ./cmd/usdt-toolexec)
	cp "$src/main.go" "$src/fire.d" "$dir/mod/"
	cp "$rules" "$dir/mod/rules.yml"
	cp "$tree/go.sum" "$dir/mod/"
	cache >"$dir/mod/cache.go"
	printf 'module example.com/fire\n\ngo 1.24\n\nrequire github.com/go-usdt/usdt v0.0.0\n\nreplace github.com/go-usdt/usdt => %s\n' "$tree" >"$dir/mod/go.mod"
	(
		cd "$dir/mod"
		export GOFLAGS=-mod=mod
		PATH=$dir:$PATH go generate .
		CGO_ENABLED=0 go build -toolexec="$dir/usdt-toolexec -rules $dir/mod/rules.yml" -o "$dir/fire" .
	)
}

# cache prints examples/toolexec's Cache, its entries and Get, as a file
# of the fire program.
cache() {
	printf 'package main\n\nimport (\n\t"errors"\n\t"sync"\n\t"time"\n)\n\n'
	awk '/^\/\/ Cache is a map/ { on = 1 } on { print } on && /^func \(c \*Cache\) Get/ { get = 1 } get && /^}/ { exit }' "$root/examples/toolexec/main.go"
}

# build_tree builds the tools of this tree (root) and the fire program
# with them into OUT/tree, saying so on stderr, and sets tool and fire to
# the wrapper and the program.
build_tree() {
	echo "# building into $OUT" >&2
	build tree "$root"
	tool=$OUT/tree/usdt-toolexec
	fire=$OUT/tree/fire
}
