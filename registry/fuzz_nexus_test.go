package registry

import (
	"testing"

	"github.com/capsulegate/capsulegate/manifest"
)

// FuzzNexusListing feeds decodeNexusListing anything: it never panics, and every item it
// accepts has a name, a version, an implementation and a role.
func FuzzNexusListing(f *testing.F) {
	for _, seed := range []string{
		`[]`,
		`[{"name":"echo","version":"1.0.0","runtime":"wasm","artifact_runtime":"tool"}]`,
		`[{"name":"git-helper","version":"0.3.1","runtime":"native","artifact_runtime":"tool","platforms":[["linux","x86_64"],["darwin","aarch64"]],"description":"helps","tags":["git"]}]`,
		`[{"name":"greeting","version":"1.0.0","runtime":"static","artifact_runtime":"skill","platforms":[],"description":null,"tags":[]}]`,
		`[{"name":"a","version":"1","runtime":"wasm","artifact_runtime":"tool"},{"name":"b","version":"2","runtime":"wasm","artifact_runtime":"hook","extra":{"x":[1,2]}}]`,
		`[{"name":"","version":"1","runtime":"wasm","artifact_runtime":"tool"}]`,
		`[{"name":"a","version":null,"runtime":"wasm","artifact_runtime":"tool"}]`,
		`[{"name":"a","version":"1","runtime":"wasm"}]`,
		`[{"name":1,"version":"1","runtime":"wasm","artifact_runtime":"tool"}]`,
		`[{"name":"a","version":"1","runtime":"wasm","artifact_runtime":"tool","platforms":[["linux"]]}]`,
		`[{"name":"a","version":"1","runtime":"wasm","artifact_runtime":"tool","platforms":"linux-x86_64"}]`,
		`[{"name":"a","version":"1","runtime":"wasm","artifact_runtime":"tool","tags":[1]}]`,
		`[{"name":"a","version":"1","runtime":"wasm","artifact_runtime":"tool","description":{}}]`,
		`[null]`, `[1,"x",[]]`, `{}`, `null`, ``, `[`, `[{"name":"a"`, "\xff[]",
		`[{"name":"a","name":"","version":"1","runtime":"wasm","artifact_runtime":"tool"}]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ls, err := decodeNexusListing(data)
		if err != nil {
			if ls != nil {
				t.Fatalf("refused, yet answered %d items", len(ls))
			}
			assertCode(t, err, CodeRemoteProtocol)
			return
		}
		for i, l := range ls {
			if l.Name == "" || l.Version == "" || l.Implementation == "" || l.Role == "" {
				t.Fatalf("item %d accepted incomplete: %+v", i, l)
			}
			if !manifest.ValidName(l.Name) || manifest.CheckVersion(l.Version) != "" {
				t.Fatalf("item %d accepted naming what no fetch could: %+v", i, l)
			}
			for _, p := range l.Platforms {
				if len(p) < 3 {
					t.Fatalf("item %d: platform %q from an incomplete pair", i, p)
				}
			}
		}
	})
}
