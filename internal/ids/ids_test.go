package ids

import (
	"regexp"
	"testing"
)

func TestNew(t *testing.T) {
	re := regexp.MustCompile(`^ses_[0-9a-f]{12}7[0-9a-f]{3}[89ab][0-9a-f]{15}$`)
	seen := map[string]bool{}
	prev := ""
	for i := 0; i < 1000; i++ {
		id := New("ses_")
		if !re.MatchString(id) {
			t.Fatalf("id %q is not a ses_ UUIDv7", id)
		}
		if seen[id] {
			t.Fatalf("duplicate %s", id)
		}
		seen[id] = true
		if id[:16] < prev[:min(16, len(prev))] {
			t.Fatalf("ids not time-ordered: %s after %s", id, prev)
		}
		prev = id
	}
}
