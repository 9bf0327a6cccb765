package archtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"slices"
	"testing"
)

// listedPackage is what loadAPI reads of go list -export -json.
type listedPackage struct {
	ImportPath, Name, Export string
	DepOnly                  bool
	Error                    *struct{ Err string }
}

// loadAPI type-checks the packages patterns name, built with env added to the
// environment (a GOOS and GOARCH), from the export data go list -export writes for them
// and their dependencies: the compiler's own view of each package, so no source is
// type-checked here. keep picks which of the named packages to return.
func loadAPI(t *testing.T, env []string, keep func(listedPackage) bool, patterns ...string) []*types.Package {
	t.Helper()
	args := append([]string{"list", "-export", "-deps", "-json=ImportPath,Name,Export,DepOnly,Error"}, patterns...)
	cmd := exec.Command("go", args...)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v\n%s", err, stderr.Bytes())
	}
	exports := map[string]string{}
	var named []string
	for dec := json.NewDecoder(bytes.NewReader(out)); dec.More(); {
		var p listedPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("go list output: %v", err)
		}
		if p.Error != nil {
			t.Fatalf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		exports[p.ImportPath] = p.Export
		if !p.DepOnly && keep(p) {
			named = append(named, p.ImportPath)
		}
	}
	imp := importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		if exports[path] == "" {
			return nil, fmt.Errorf("go list gave no export data for %s", path)
		}
		return os.Open(exports[path])
	})
	var pkgs []*types.Package
	for _, path := range named {
		p, err := imp.Import(path)
		if err != nil {
			t.Fatalf("import %s: %v", path, err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// public reports whether a package of the module is public API: its path has no
// internal element and it is not a main package. A main package cannot be imported, so
// no caller can reach what it exports.
func public(p listedPackage) bool {
	return !isInternal(rel(p.ImportPath)) && p.Name != "main"
}

// TestPublicAPINamesNoInternalType checks that no exported identifier of a public
// package mentions a type of an internal package: such an API does not compile in the
// code outside the module it is documented for.
// The guest SDK and the example guests are built for wasip1 too, with files of their
// own there, so their API is checked in that build as well.
func TestPublicAPINamesNoInternalType(t *testing.T) {
	builds := []struct {
		name     string
		env      []string
		patterns []string
		atLeast  int
	}{
		{"host", nil, []string{"./..."}, 20},
		{"wasip1", []string{"GOOS=wasip1", "GOARCH=wasm"}, []string{"./wit/guest/...", "./examples/..."}, 5},
	}
	for _, b := range builds {
		t.Run(b.name, func(t *testing.T) {
			pkgs := loadAPI(t, b.env, public, b.patterns...)
			if len(pkgs) < b.atLeast {
				t.Fatalf("checked only %d packages: is go list output as expected?", len(pkgs))
			}
			for _, leak := range InternalLeaks(pkgs) {
				t.Error(leak)
			}
		})
	}
}

func every(listedPackage) bool { return true }

// leakPkg is planted under testdata (out of ./...): its exported API mentions internal
// types of the module in each kind of position the check walks, beside positions it
// must not report and cyclic types.
const leakPkg = "./internal/archtest/testdata/leak"

// The check on the planted package reports each leak by its identifier, and nothing else.
func TestInternalLeaksReportsPlanted(t *testing.T) {
	pkgs := loadAPI(t, nil, every, leakPkg)
	const (
		cache   = "*github.com/capsulegate/capsulegate/internal/filesum.Cache"
		section = "github.com/capsulegate/capsulegate/internal/wasmbin.Section"
		reader  = "*github.com/capsulegate/capsulegate/internal/wasmbin.Reader"
		tail    = " (an internal type: callers outside the module cannot name it; fix: "
	)
	// Where the internal type stands inside a composite, the finding names it bare.
	bareCache, bareReader := cache[1:], reader[1:]
	want := []string{
		"leak.Boxed: its type is leak.Box[" + cache + "], which mentions " + bareCache + tail + "give it an exported type)",
		"leak.Config.Cache: the field's type is " + cache + tail + "give the field an exported type or unexport it)",
		"leak.Config.Set: param 1 is map[string][]" + section + ", which mentions " + section + tail + "take an exported type)",
		"leak.Default: its type is " + cache + tail + "give it an exported type)",
		"leak.Node.Reader: the field's type is " + reader + tail + "give the field an exported type or unexport it)",
		"leak.Node.Sum: result 1 is " + cache + tail + "return an exported type)",
		"leak.Of: type parameter T's constraint is " + cache + " | " + reader + ", which mentions " + bareCache + tail + "constrain it with an exported type)",
		"leak.Of: type parameter T's constraint is " + cache + " | " + reader + ", which mentions " + bareReader + tail + "constrain it with an exported type)",
		"leak.Open: result 1 is " + cache + tail + "return an exported type)",
		"leak.Read: param 1 is func(" + section + ") bool, which mentions " + section + tail + "take an exported type)",
		"leak.Section: the aliased type is " + section + tail + "declare a type of its own or alias an exported one)",
		"leak.Sections: its underlying type is []" + section + tail + "declare it over an exported type)",
		"leak.Source.Next: result 1 is " + section + tail + "return an exported type)",
		"leak.node.Sum (reached through leak.Node.Kids): the field's type is " + cache + tail + "give the field an exported type or unexport it)",
	}
	got := InternalLeaks(pkgs)
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("not reported: %s", w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			t.Errorf("reported, not planted: %s", g)
		}
	}
}

// The check ends on types that refer to themselves, through fields, embedding and
// methods, within and across named types.
func TestInternalLeaksEndsOnCycles(t *testing.T) {
	pkgs := loadAPI(t, nil, every, leakPkg+"/cycle")
	want := []string{"cycle.link.Leak (reached through cycle.List.Link): the field's type is *github.com/capsulegate/capsulegate/internal/filesum.Cache (an internal type: callers outside the module cannot name it; fix: give the field an exported type or unexport it)"}
	if got := InternalLeaks(pkgs); !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}
