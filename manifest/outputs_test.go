package manifest

import (
	"slices"
	"testing"
)

// TestOutputName: the names a2a.outputs and a task's out/a2a.json may give, one rule for both.
func TestOutputName(t *testing.T) {
	for name, want := range map[string]bool{
		"report.pdf": true, "charts/a.png": true,
		"": false, ".": false, "../x": false, "/abs": false, "dir/": false, "a//b": false, `a\b`: false, "./a": false,
	} {
		if got := OutputName(name); got != want {
			t.Errorf("OutputName(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestCardOutputModes: an output file's type on the card is the one its artifact gets, an
// unknown extension's application/octet-stream included.
func TestCardOutputModes(t *testing.T) {
	a := A2A{OutputModes: []string{"image/png"}, Outputs: []Output{
		{File: "r.pdf", As: OutputFile}, {File: "blob.xyz123", As: OutputFile}, {File: "n.json", As: OutputData}, {File: "t.md", As: OutputText},
	}}
	want := []string{"image/png", "application/pdf", "application/octet-stream", "application/json", "text/plain"}
	if got := a.CardOutputModes(); !slices.Equal(got, want) {
		t.Errorf("CardOutputModes = %v, want %v", got, want)
	}
}
