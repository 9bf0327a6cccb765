package storetest_test

import (
	"testing"

	"github.com/capsulegate/capsulegate/taskstore"
	"github.com/capsulegate/capsulegate/taskstore/storetest"
)

// TestMemPins runs the runtime pins' checks against taskstore.MemPins, which has no
// restart to survive.
func TestMemPins(t *testing.T) {
	storetest.RunPins(t, &taskstore.MemPins{}, nil)
}
