package registry

import (
	"archive/zip"
	"bytes"
	"fmt"
	"time"
)

// wasmPrefix starts every wasm module and component.
var wasmPrefix = []byte("\x00asm")

// IsWasm reports whether b is a wasm binary (a module or a component) rather than an
// archive.
func IsWasm(b []byte) bool { return bytes.HasPrefix(b, wasmPrefix) }

// WasmToolArchive reads a plain wasm binary — a component published in the CNCF Wasm
// OCI layout, which carries no Murmur manifest — as a tool artifact: an archive holding
// a murmur.yaml that names it (runtime tool, implementation wasm) and the binary as
// <name>.wasm, opened with every rule. It is built the same way every time, so the
// archive for given bytes never changes; the lock pins the binary's own sha256.
func WasmToolArchive(name, version string, wasm []byte) (*Archive, error) {
	if !IsWasm(wasm) {
		return nil, refuse(CodeNoPayload, fmt.Sprintf("artifact %s@%s: the layer is not a wasm binary", name, version),
			"publish a wasm component, or a .mur.zip with `caddy capsule publish`")
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	when := time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)
	man := fmt.Sprintf("name: %s\nversion: %q\nruntime: tool\nimplementation: wasm\n", name, version)
	for _, f := range []struct {
		name string
		data []byte
	}{{"murmur.yaml", []byte(man)}, {name + ".wasm", wasm}} {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: f.name, Method: zip.Store, Modified: when})
		if err != nil {
			return nil, err
		}
		if _, err := w.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return OpenArchive(buf.Bytes())
}
