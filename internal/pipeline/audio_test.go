package pipeline_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
)

func frameOf(samples int, final bool) pipeline.Frame {
	return pipeline.Frame{PCM: make([]int16, samples), SampleRate: 16000, Final: final}
}

// TestFrameQueueBudget: the budget is shared by every queue drawing on it,
// a push past it is refused without blocking, and bytes come back as
// frames are taken or a queue is closed.
func TestFrameQueueBudget(t *testing.T) {
	b := pipeline.NewAudioBudget(3 * 640)
	q1, q2 := pipeline.NewFrameQueue(b), pipeline.NewFrameQueue(b)
	require.NoError(t, q1.Push(frameOf(320, false)))
	require.NoError(t, q2.Push(frameOf(320, false)))
	require.NoError(t, q1.Push(frameOf(320, false)))
	require.EqualValues(t, 3*640, b.Used())
	require.ErrorIs(t, q2.Push(frameOf(320, false)), pipeline.ErrAudioBufferFull)
	require.Equal(t, 1, q2.Len(), "a refused frame is not queued")

	got := q1.Take(nil)
	require.Len(t, got, 2)
	require.EqualValues(t, 640, b.Used(), "taken frames leave the budget")
	require.NoError(t, q2.Push(frameOf(320, true)))

	q2.Close()
	require.Zero(t, b.Used(), "a closed queue gives back what it held")
	require.NoError(t, q2.Push(frameOf(320, false)), "a closed queue drops frames silently")
	require.Zero(t, q2.Len())
	require.Zero(t, b.Used())
}

// TestFrameQueueBatches: Take hands over frames in order, a bounded batch
// at a time, and the consumer is woken once per empty-to-non-empty turn,
// not once per frame.
func TestFrameQueueBatches(t *testing.T) {
	q := pipeline.NewFrameQueue(nil)
	for i := range 40 {
		require.NoError(t, q.Push(frameOf(i+1, i == 39)))
	}
	require.Len(t, q.Ready(), 1, "one pending wake-up for 40 pushes")
	<-q.Ready()
	var all []pipeline.Frame
	for {
		batch := q.Take(nil)
		if len(batch) == 0 {
			break
		}
		require.LessOrEqual(t, len(batch), 16)
		all = append(all, batch...)
	}
	require.Len(t, all, 40)
	for i, f := range all {
		require.Len(t, f.PCM, i+1, "frame %d out of order", i)
	}
	require.True(t, all[39].Final)
	require.Empty(t, q.Ready(), "no wake-up while the queue stayed non-empty")
	require.NoError(t, q.Push(frameOf(1, false)))
	require.Len(t, q.Ready(), 1, "an empty queue turning non-empty wakes the consumer")
}

// TestAudioBudgetUnlimited: a budget of 0 or less never refuses.
func TestAudioBudgetUnlimited(t *testing.T) {
	for _, limit := range []int64{0, -1} {
		q := pipeline.NewFrameQueue(pipeline.NewAudioBudget(limit))
		for range 1000 {
			require.NoError(t, q.Push(frameOf(320, false)))
		}
	}
}

// TestFrameQueueWakeAfter: with WakeAfter, frames below the threshold do
// not wake a waiting consumer; reaching it or a final frame does, once,
// and a drained queue starts counting again.
func TestFrameQueueWakeAfter(t *testing.T) {
	tests := []struct {
		name   string
		pushes []pipeline.Frame
		wake   []bool // a wake-up is pending after each push
	}{
		{"threshold", []pipeline.Frame{frameOf(320, false), frameOf(320, false), frameOf(320, false), frameOf(320, false)},
			[]bool{false, false, true, true}},
		{"final at once", []pipeline.Frame{frameOf(320, true)}, []bool{true}},
		{"final below threshold", []pipeline.Frame{frameOf(320, false), frameOf(0, true)}, []bool{false, true}},
		{"one large frame", []pipeline.Frame{frameOf(2000, false)}, []bool{true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := pipeline.NewFrameQueue(nil)
			q.WakeAfter(960) // 60 ms at 16 kHz
			for i, f := range tt.pushes {
				require.NoError(t, q.Push(f))
				require.Equal(t, tt.wake[i], len(q.Ready()) == 1, "after push %d", i)
			}
			<-q.Ready()
			require.Len(t, q.Take(nil), len(tt.pushes))
			require.NoError(t, q.Push(frameOf(320, false)))
			require.Empty(t, q.Ready(), "a drained queue waits for the threshold again")
			require.NoError(t, q.Push(frameOf(640, false)))
			require.Len(t, q.Ready(), 1)
		})
	}
}
