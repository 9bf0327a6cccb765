package registry

import (
	"encoding/json"
	"github.com/capsulegate/capsulegate/internal/digest"
	"strings"
	"testing"
)

// FuzzOCIManifest feeds decodeOCIManifest anything: it must never panic, and a manifest
// it accepts must have exactly one layer, with a well-formed sha256 digest that is the
// one it returns and a size within bounds.
func FuzzOCIManifest(f *testing.F) {
	broken := validOCIManifest(false)
	broken["layers"] = append(broken["layers"].([]any), layer0(validOCIManifest(true)))
	for _, seed := range [][]byte{
		ociJSON(validOCIManifest(false)),
		ociJSON(validOCIManifest(true)),
		ociJSON(broken),
		[]byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","layers":[{"digest":"sha256:"}]}`),
		[]byte(`{"schemaVersion":2,"layers":null,"LAYERS":[{}]}`),
		[]byte(`null`),
		[]byte(`{`),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeOCIManifest(data)
		if err != nil {
			if m != nil {
				t.Fatal("a refusal returned a manifest too")
			}
			return
		}
		var raw struct {
			Layers []struct {
				Digest string `json:"digest"`
				Size   int64  `json:"size"`
			} `json:"layers"`
		}
		if err := json.Unmarshal(data, &raw); err != nil {
			t.Fatalf("accepted what does not decode: %v", err)
		}
		if len(raw.Layers) != 1 {
			t.Fatalf("accepted %d layers", len(raw.Layers))
		}
		l := raw.Layers[0]
		hex, ok := strings.CutPrefix(l.Digest, "sha256:")
		if !ok || !digest.Valid(hex) || hex != m.SHA256 {
			t.Fatalf("accepted layer digest %q, returned %q", l.Digest, m.SHA256)
		}
		if l.Size != m.Size || m.Size < 0 || m.Size > MaxArchiveFileBytes {
			t.Fatalf("accepted layer size %d, returned %d", l.Size, m.Size)
		}
	})
}
