// Command caddy is scripts/bench-scale.sh's largest program: Caddy
// v2.11.9 with its standard modules, as the caddy command builds it, so
// that probing "..." with inline: probe puts 120,000+ probes into one
// executable. bench-scale runs it as "caddy version".
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

func main() { caddycmd.Main() }
