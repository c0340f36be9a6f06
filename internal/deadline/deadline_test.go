package deadline_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/deadline"
)

func TestRequest(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tests := []struct {
		name   string
		client time.Duration // client deadline after the final frame
		want   time.Duration
	}{
		{"client asks less", 500 * time.Millisecond, 500 * time.Millisecond},
		{"client asks more: capped", 5 * time.Second, 1700 * time.Millisecond},
		{"exactly the max", 1700 * time.Millisecond, 1700 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := deadline.Request(t0.Add(tt.client), t0, 1700*time.Millisecond)
			require.Equal(t, t0.Add(tt.want), got)
		})
	}
}

func TestStageBudget(t *testing.T) {
	stage := deadline.Stage{Name: "llm", Cap: 700 * time.Millisecond, Min: 120 * time.Millisecond}
	tests := []struct {
		name    string
		left    time.Duration
		want    time.Duration // 0: not started
		skipped bool
	}{
		{"plenty: capped", 2 * time.Second, 700 * time.Millisecond, false},
		{"some: time left less reserve", 500 * time.Millisecond, 400 * time.Millisecond, false},
		{"just the minimum", 220 * time.Millisecond, 120 * time.Millisecond, false},
		{"below the minimum: skipped", 200 * time.Millisecond, 0, true},
		{"nothing left", 50 * time.Millisecond, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				parent, cancel := context.WithTimeout(t.Context(), tt.left)
				defer cancel()
				sctx, stop, err := stage.Start(parent, 100*time.Millisecond)
				if tt.skipped {
					var be *deadline.BudgetError
					require.ErrorAs(t, err, &be)
					require.Equal(t, "llm", be.Stage)
					return
				}
				require.NoError(t, err)
				defer stop()
				dl, _ := sctx.Deadline()
				require.Equal(t, tt.want, time.Until(dl))
				pdl, _ := parent.Deadline()
				require.False(t, dl.After(pdl), "a stage never outlives the request")

				<-sctx.Done()
				require.ErrorIs(t, context.Cause(sctx), context.DeadlineExceeded)
				var st *deadline.StageTimeout
				require.True(t, errors.As(context.Cause(sctx), &st), "the stage's own budget ended it")
			})
		})
	}
}

// TestStageSharesRequestDeadline: successive stages derived from one
// request context all end by its deadline, however they are capped.
func TestStageSharesRequestDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		req, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		reqDL, _ := req.Deadline()
		big := deadline.Stage{Name: "s", Cap: time.Hour, Min: time.Millisecond}
		for range 3 {
			sctx, stop, err := big.Start(req, 100*time.Millisecond)
			require.NoError(t, err)
			dl, _ := sctx.Deadline()
			require.Equal(t, reqDL.Add(-100*time.Millisecond), dl)
			time.Sleep(200 * time.Millisecond) // the stage takes a while (fake time)
			stop()
		}
	})
}

func TestRemaining(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		require.Equal(t, time.Second, deadline.Remaining(ctx))
		time.Sleep(2 * time.Second)
		require.Zero(t, deadline.Remaining(ctx))
	})
}

func BenchmarkStageStart(b *testing.B) {
	parent, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	st := deadline.Stage{Name: "intent", Cap: 250 * time.Millisecond, Min: 5 * time.Millisecond}
	for b.Loop() {
		_, stop, _ := st.Start(parent, 100*time.Millisecond)
		stop()
	}
}
