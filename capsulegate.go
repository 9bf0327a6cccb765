// Package capsulegate is the module's root: importing it plugs capsulegate's Caddy
// modules (the capsule app, the capsule and capsule_replay handlers, `caddy capsule …`)
// into a Caddy build, which is what `xcaddy build --with github.com/capsulegate/capsulegate`
// does.
package capsulegate

import (
	// The Caddy modules register themselves when imported.
	_ "github.com/capsulegate/capsulegate/caddymodule"
)
