package pipeline

import (
	"errors"
	"sync"
	"sync/atomic"
)

// ErrAudioBufferFull is returned by FrameQueue.Push when the server-wide
// budget of buffered audio is spent: more audio waits for recognizers than
// the server is willing to hold.
var ErrAudioBufferFull = errors.New("buffered audio budget spent")

// AudioBudget bounds the audio buffered for recognizers across every
// request of a server, in bytes of 16-bit PCM. It is safe for concurrent
// use.
type AudioBudget struct {
	limit int64
	used  atomic.Int64
}

// NewAudioBudget returns a budget of limit bytes; limit <= 0 means no
// limit.
func NewAudioBudget(limit int64) *AudioBudget {
	return &AudioBudget{limit: limit}
}

// Used returns the bytes buffered now.
func (b *AudioBudget) Used() int64 { return b.used.Load() }

// Limit returns the budget in bytes (0: none).
func (b *AudioBudget) Limit() int64 { return max(b.limit, 0) }

func (b *AudioBudget) reserve(n int64) bool {
	if b.used.Add(n) > b.limit && b.limit > 0 {
		b.used.Add(-n)
		return false
	}
	return true
}

func (b *AudioBudget) release(n int64) {
	if n != 0 {
		b.used.Add(-n)
	}
}

// FrameQueue carries one request's audio from the connection's reader to
// its recognizer. The reader never waits: a recognizer that is behind (or
// audio sent faster than real time) only makes the queue longer, and the
// caller bounds its length per request (the longest utterance) while the
// AudioBudget bounds all queues together. The consumer takes frames in
// batches and is woken only when the queue turns non-empty, so a stream
// costs one wake-up per batch rather than one hand-off per frame. With
// WakeAfter, a real-time stream wakes it once per few frames instead.
type FrameQueue struct {
	budget *AudioBudget
	ready  chan struct{} // capacity 1: the queue turned non-empty
	wakeAt int64         // bytes queued that wake the consumer (0: any); set before use

	mu     sync.Mutex
	frames []Frame // frames[head:] are queued; guarded by mu
	head   int     // guarded by mu
	bytes  int64   // bytes of the queued frames, reserved from budget; guarded by mu
	closed bool    // guarded by mu
	woken  bool    // a wake-up was sent since the queue was last emptied; guarded by mu
}

// maxBatch is the most frames Take hands over at once. It bounds the audio
// a consumer holds outside the budget (16 frames of 20 ms at 16 kHz are
// 10 KiB) while still sparing it a wake-up per frame.
const maxBatch = 16

// NewFrameQueue returns an empty queue drawing on budget (nil: unbounded).
func NewFrameQueue(budget *AudioBudget) *FrameQueue {
	if budget == nil {
		budget = &AudioBudget{}
	}
	return &FrameQueue{budget: budget, ready: make(chan struct{}, 1)}
}

// WakeAfter makes Push wake the consumer only once at least samples
// samples are queued, or with a final frame, rather than with the first
// frame queued. A recognizer fed in real time then wakes once per few
// frames (a goroutine hand-off is a large part of a frame's CPU cost), at
// the price of seeing audio, and sending partial transcripts, up to that
// much later; the final frame is never held back. Call it before the
// first Push.
func (q *FrameQueue) WakeAfter(samples int) {
	q.wakeAt = int64(max(samples, 0)) * 2
}

// Push appends f without blocking. It returns ErrAudioBufferFull when the
// budget cannot hold f's samples; a closed queue drops f silently, since
// its consumer is gone.
func (q *FrameQueue) Push(f Frame) error {
	n := int64(len(f.PCM)) * 2
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	if !q.budget.reserve(n) {
		q.mu.Unlock()
		return ErrAudioBufferFull
	}
	q.frames = append(q.frames, f)
	q.bytes += n
	wake := !q.woken && (f.Final || q.bytes >= q.wakeAt)
	q.woken = q.woken || wake
	q.mu.Unlock()
	if wake {
		select {
		case q.ready <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
	return nil
}

// Ready is signalled when the queue turns non-empty. A signal may be
// stale (the frames already taken): Take again and wait again if empty.
func (q *FrameQueue) Ready() <-chan struct{} { return q.ready }

// Take moves the oldest queued frames, at most a small batch of them, to
// the end of dst and returns it; their bytes go back to the budget.
func (q *FrameQueue) Take(dst []Frame) []Frame {
	q.mu.Lock()
	defer q.mu.Unlock()
	batch := q.frames[q.head:min(q.head+maxBatch, len(q.frames))]
	for i := range batch {
		q.bytes -= int64(len(batch[i].PCM)) * 2
		q.budget.release(int64(len(batch[i].PCM)) * 2)
	}
	dst = append(dst, batch...)
	clear(batch) // the PCM goes with the consumer's batch
	q.head += len(batch)
	if q.head == len(q.frames) {
		// The consumer waits only on an empty queue: the next frames
		// must wake it again.
		q.frames, q.head, q.woken = q.frames[:0], 0, false
	}
	return dst
}

// Len returns the number of queued frames.
func (q *FrameQueue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.frames) - q.head
}

// Close drops what is queued, returns its bytes to the budget and makes
// later pushes no-ops. The consumer closes the queue when it stops.
func (q *FrameQueue) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.frames, q.head = nil, 0
	q.budget.release(q.bytes)
	q.bytes = 0
}
