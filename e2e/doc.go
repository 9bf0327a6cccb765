// Package e2e holds the end-to-end tests: each drives the real gateway binary, built
// once per test run from ./cmd/caddy with the sandbox helper beside it (main_test.go),
// through its `caddy capsule …` commands and as a served Caddy, the way an operator
// and an A2A client would; TestMain also starts `make gateway` (the xcaddy build) beside
// the tests, for TestXcaddyGateway. It has no code of its own.
package e2e
