//go:build wasip1

// Command summaryhook is a blocking on-compaction hook that answers replace-context with
// one summary message naming how many messages it replaces and echoing what it was
// handed (roles, the first content, model and system prompt), so a test sees both
// directions of the lowering.
package main

import (
	"fmt"
	"strings"

	"github.com/capsulegate/capsulegate/wit/guest/hook"
)

func init() {
	hook.Handle(hook.Handlers{Compaction: func(e hook.CompactionEvent) (hook.Output, error) {
		roles := make([]string, len(e.Messages))
		for i, m := range e.Messages {
			roles[i] = m.Role
		}
		first := ""
		if len(e.Messages) > 0 {
			first = e.Messages[0].Content
		}
		deref := func(s *string) string {
			if s == nil {
				return "-"
			}
			return *s
		}
		text := fmt.Sprintf("summaryhook: %d messages (%s), first %q; %d tokens at %.2f; model %s; system %s",
			len(e.Messages), strings.Join(roles, ","), first, e.SessionTokens, e.Threshold, deref(e.Model), deref(e.SystemPrompt))
		inserted := hook.CaseReplaceContext
		return hook.ReplaceContext(hook.Message{Role: "user", Content: text, InsertedBy: &inserted}), nil
	}})
}

func main() {}
