package codexdriver

import (
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/internal/harnesstest"
	"github.com/capsulegate/capsulegate/runtime"
)

// TestStage stages a capsule on the packed driver artifact: with its install folder
// granted, describe() passes every check of the stage and the capsule stages; without,
// E-PRC-009 names the folder.
func TestStage(t *testing.T) {
	tests := []struct {
		name, caps string
		want       []string
	}{
		{"install folder granted", "  harness: {paths: [{path: " + InstallPath + "}]}\n", nil},
		{"a folder above it granted", "  harness: {paths: [{path: /usr/lib/node_modules}]}\n", nil},
		{"nothing granted", "  harness: {paths: [{path: /opt}]}\n", []string{runtime.CodeProcessPath}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := harnesstest.StageCodes(t, "..", tt.caps); strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("codes %v, want %v", got, tt.want)
			}
		})
	}
}
