// Package deadline computes request deadlines and stage budgets. The
// deadline itself always lives in a context.Context: this package only
// derives budgets from it, so every stage and every attempt of a request
// sees the one deadline that was set when the request's final frame
// arrived, and timeouts can never add up past it.
package deadline

import (
	"context"
	"fmt"
	"time"
)

// Request returns the pipeline deadline of a request: the client's
// deadline, but never more than maxBudget after the final frame arrived.
func Request(clientDeadline, finalArrival time.Time, maxBudget time.Duration) time.Time {
	if limit := finalArrival.Add(maxBudget); limit.Before(clientDeadline) {
		return limit
	}
	return clientDeadline
}

// Remaining returns the time left before ctx's deadline, or a very large
// duration when ctx has none. It is never negative.
func Remaining(ctx context.Context) time.Duration {
	d, ok := ctx.Deadline()
	if !ok {
		return 1<<63 - 1
	}
	return max(time.Until(d), 0)
}

// Stage is the budget policy of one stage.
type Stage struct {
	// Name names the stage in errors, logs and metrics.
	Name string
	// Cap is the longest the stage may run, however much time is left.
	Cap time.Duration
	// Min is the least budget worth starting the stage with; below it the
	// stage is skipped.
	Min time.Duration
}

// BudgetError reports a stage that was not started because the time left
// could not cover its minimum.
type BudgetError struct {
	Stage string
	Left  time.Duration // time left after the reserve
	Min   time.Duration
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("%s: %v left, needs at least %v", e.Stage, e.Left.Round(time.Millisecond), e.Min)
}

// Start derives the stage's context, whose deadline is now plus
// min(Cap, time left - reserve). Because it derives from ctx, it can only
// shorten the request's deadline, never extend it. It returns no context
// and ctx's cause when ctx is already done (a cancellation stays a
// cancellation), and a *BudgetError when the budget is below Min.
//
// The stage's deadline is computed from one reading of the clock, as an
// absolute time: when the cap does not bind it is exactly the request's
// deadline less the reserve, however long the goroutine was delayed
// between reading the time left and deriving the context.
func (s Stage) Start(ctx context.Context, reserve time.Duration) (context.Context, context.CancelFunc, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, context.Cause(ctx)
	}
	now := time.Now()
	b := s.Cap
	if d, ok := ctx.Deadline(); ok {
		b = min(b, max(d.Sub(now), 0)-reserve)
	}
	if b < s.Min || b <= 0 {
		return nil, nil, &BudgetError{Stage: s.Name, Left: max(b, 0), Min: s.Min}
	}
	sctx, cancel := context.WithDeadlineCause(ctx, now.Add(b), &StageTimeout{Stage: s.Name, Budget: b})
	return sctx, cancel, nil
}

// StageTimeout is the cancellation cause of a stage context whose own
// budget ran out (as opposed to the request's deadline or a cancellation).
type StageTimeout struct {
	Stage  string
	Budget time.Duration
}

func (e *StageTimeout) Error() string {
	return fmt.Sprintf("%s: budget of %v used up", e.Stage, e.Budget.Round(time.Millisecond))
}

// Is makes a StageTimeout match context.DeadlineExceeded.
func (e *StageTimeout) Is(target error) bool { return target == context.DeadlineExceeded }
