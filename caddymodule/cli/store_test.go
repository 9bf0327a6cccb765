package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/internal/testkit/pgtest"
	"github.com/capsulegate/capsulegate/pgstore"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.CloseShared()
	os.Exit(code)
}

// TestStoreMigrateAndCheck runs `store migrate` and `store check` on a real PostgreSQL
// database, given as a URL and as env:NAME: check refuses the database before it is
// migrated, migrate migrates once, check then counts; migrate refuses a file.
func TestStoreMigrateAndCheck(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	ctx := context.Background()
	for _, tt := range []struct {
		name, cmd, arg string
		vars           map[string]string
		exit           int
		want           string // in stdout, or stderr when exit != 0
	}{
		{"check before migrate", "check", dsn, nil, ExitRefused, "E-STORE-013"},
		{"migrate", "migrate", "env:CAPSULE_STORE", map[string]string{"CAPSULE_STORE": dsn}, ExitOK, `"from": 0`},
		{"migrate again", "migrate", dsn, nil, ExitOK, fmt.Sprintf(`"from": %d`, pgstore.SchemaVersion)},
		{"check", "check", "env:CAPSULE_STORE", map[string]string{"CAPSULE_STORE": dsn}, ExitOK, fmt.Sprintf(`"schema": %d`, pgstore.SchemaVersion)},
		{"migrate a file", "migrate", "/var/lib/caddy/tasks.db", nil, ExitRefused, "E-STORE-017"},
		{"empty variable", "check", "env:NOPE", nil, ExitRefused, "E-STORE-017"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, out, errb := newEnv(false, tt.vars)
			c := Common{JSON: true}
			var code int
			if tt.cmd == "check" {
				code = StoreCheck(ctx, e, c, tt.arg)
			} else {
				code = StoreMigrate(ctx, e, c, tt.arg)
			}
			got := out.String()
			if code != ExitOK {
				got = errb.String() + out.String()
			}
			if code != tt.exit || !strings.Contains(got, tt.want) {
				t.Fatalf("exit %d, output %s; want exit %d with %s", code, got, tt.exit, tt.want)
			}
			if !json.Valid(out.Bytes()) {
				t.Errorf("--json output is not JSON: %s", got)
			}
			if strings.Contains(got, "capsulegate@") {
				t.Errorf("the output shows the URL's user: %s", got)
			}
		})
	}
}
