module github.com/go-usdt/usdt

go 1.25

require (
	github.com/cilium/ebpf v0.20.0
	github.com/rogpeppe/go-internal v1.16.0
	golang.org/x/sys v0.37.0
	gopkg.in/yaml.v3 v3.0.1
)

require golang.org/x/tools v0.38.0 // indirect
