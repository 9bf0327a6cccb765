package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/capsulegate/capsulegate/errs"
)

// CodeBudget ends a task that needed another model turn after its principal's token
// budget was spent.
const CodeBudget = "E-RUN-022"

// Budget is a task's share of its principal's model-token budget (the gateway's
// a2a.Budget): Spend adds a turn's tokens and returns the count and the budget.
type Budget interface {
	Spend(ctx context.Context, tokens int64) (spent, budget int64, err error)
}

// budgetSink is the event-stream sink of one task's budget: it adds every turn's and
// compaction's tokens, as the providers reported them, to the principal's count, and
// denies an inference event after which the loop would call the model again once the
// count has reached the budget. The turn that crossed it is spent (the model answered
// already); the task ends there rather than start another.
type budgetSink struct {
	ctx    context.Context
	budget Budget
}

// budgetTimeout bounds a store's answer to one Spend: a store that does not answer
// must not stall the task (its tokens then go uncounted; the error is logged by the
// store's own health reporting).
const budgetTimeout = 5 * time.Second

func (b *budgetSink) Event(e *Event) error {
	var tokens int64
	var next bool // the loop goes on to another model turn after this event
	switch d := e.Data.(type) {
	case Inference:
		if e.Type != EventInference {
			return nil
		}
		tokens, next = int64(d.InputTokens+d.OutputTokens), d.StopReason == "tool_call"
	case Compaction:
		if d.Summariser == SummariserDriver {
			tokens = int64(d.SummaryInput + d.SummaryOutput)
		}
	default:
		return nil
	}
	if tokens == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(b.ctx), budgetTimeout)
	defer cancel()
	spent, budget, err := b.budget.Spend(ctx, tokens)
	if err != nil || !next || spent < budget {
		return nil
	}
	e.Deny("budget", errs.New(CodeBudget, "runtime",
		fmt.Sprintf("the principal's model-token budget is spent: %d of %d tokens used in this window; the task stops before another model turn", spent, budget),
		"wait for the next window, or ask the operator to raise the route's token limit").Error())
	return nil
}
