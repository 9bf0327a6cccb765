package manifest

import (
	"slices"
	"testing"
)

// TestWritten: Written finds a key wherever the file wrote it with a value, by its
// KeyPaths spelling, and never a key written as null or empty (here `lifecycle:`).
func TestWritten(t *testing.T) {
	const doc = `name: cap
version: 1.0.0
artifacts:
  - {name: a, version: 1.0.0, config: {x: 1}}
  - {name: b, version: 1.0.0}
  - {name: c, version: 1.0.0, config: {y: 2}}
context:
  max_tokens: 100
observability:
  otel_endpoint: https://otel.example
lifecycle:
`
	m, err := Parse([]byte(doc), "murmur.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		key  string
		want []string
	}{
		{"artifacts[].config", []string{"artifacts[0].config", "artifacts[2].config"}},
		{"artifacts[].name", []string{"artifacts[0].name", "artifacts[1].name", "artifacts[2].name"}},
		{"observability.otel_endpoint", []string{"observability.otel_endpoint"}},
		{"observability", []string{"observability"}},
		{"context", []string{"context"}},
		{"context.max_tokens", []string{"context.max_tokens"}},
		{"lifecycle", nil},
		{"inference", nil},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			if !slices.Contains(KeyPaths(), tt.key) {
				t.Fatalf("%s is not a key path", tt.key)
			}
			if got := m.Written(tt.key); !slices.Equal(got, tt.want) {
				t.Errorf("Written(%s) = %v, want %v", tt.key, got, tt.want)
			}
		})
	}
	if got := (&Manifest{}).Written("name"); got != nil {
		t.Errorf("a manifest not parsed has written %v", got)
	}
}
