package runtime

import (
	"context"
	"fmt"
	"strings"

	"github.com/capsulegate/capsulegate/runtime/wasm/murmur"
)

// scriptTask runs one task of a script capsule: its module's murmur:capsule/run, whose
// answer is the out/result.txt it wrote.
func (s *session) scriptTask(ctx context.Context, t *task) (result, state string, err error) {
	m := s.staged.Manifest
	// A stale answer of the previous task must not pass for this one's.
	s.held.Drop("out/result.txt")
	if err := murmur.RunScript(ctx, s.rt.engine, s.staged.Script, s.grants(m.Name, murmur.RoleCapsule), s.imports(t, m.Name)); err != nil {
		if said := s.lastWords(m.Name + ".stderr.log"); said != "" {
			err = fmt.Errorf("%w; the guest's stderr ended with: %s", err, said)
		}
		return "", StateFailed, err
	}
	data, err := s.held.Read("out/result.txt", 16<<20)
	if err != nil {
		return "", StateFailed, fmt.Errorf("the capsule finished but wrote no out/result.txt: %w", err)
	}
	return strings.TrimRight(string(data), "\n"), StateCompleted, nil
}
