package claudecode

import (
	"testing"

	"github.com/capsulegate/capsulegate/internal/testkit/harnesstest"
)

// TestStage stages a capsule on the packed driver artifact: with its install folder
// granted, describe() passes every check of the stage and the capsule stages; without,
// E-PRC-009 names the folder.
func TestStage(t *testing.T) { harnesstest.StageTable(t, "..", InstallPath) }
