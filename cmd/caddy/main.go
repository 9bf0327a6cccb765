// Command caddy is Caddy with the standard modules plus capsulegate's: exactly what
// `xcaddy build --with github.com/capsulegate/capsulegate` would produce.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/capsulegate/capsulegate/caddymodule"
)

func main() {
	caddycmd.Main()
}
