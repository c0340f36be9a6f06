package speech

import (
	"fmt"
	"time"

	"github.com/voiced/voiced/internal/audio/resample"
)

// Filters caches one resampling filter per pair of rates; each synthesis
// takes a clone with fresh state. The zero value is ready; it is safe for
// concurrent use.
type Filters struct {
	resample.Filters
}

// Output takes an engine's audio at its native rate, resamples it to the
// requested rate and emits it in chunks of at most MaxChunk, recording
// what it emitted in a Result. It is not safe for concurrent use.
type Output struct {
	rs        *resample.Resampler
	emit      func(pcm []int16)
	res       *Result
	start     time.Time
	buf, tmp  []int16
	min, max  int // chunk bounds in output samples
	finalised bool
}

// NewOutput returns an Output from inRate to res.SampleRate that calls
// emit with each chunk (emit owns the slice). It holds audio back until
// at least minChunk is buffered (0: emit what each Write brings), so an
// engine that produces audio in many small pieces sends fewer, larger
// chunks. start is when the synthesis began, for res.FirstChunk.
func (f *Filters) NewOutput(inRate int, minChunk time.Duration, start time.Time, res *Result, emit func(pcm []int16)) (*Output, error) {
	rs, err := f.Get(inRate, res.SampleRate)
	if err != nil {
		return nil, fmt.Errorf("output: %w", err)
	}
	maxN := int(int64(res.SampleRate) * int64(MaxChunk) / int64(time.Second))
	minN := min(max(int(int64(res.SampleRate)*int64(minChunk)/int64(time.Second)), 1), maxN)
	return &Output{rs: rs, emit: emit, res: res, start: start, min: minN, max: maxN}, nil
}

// Write adds audio at the native rate.
func (o *Output) Write(pcm []int16) {
	o.tmp = o.rs.Process(o.tmp[:0], pcm)
	o.buf = append(o.buf, o.tmp...)
	o.drain(false)
}

// Close pushes out the audio still inside the resampling filter and emits
// what is buffered. Call it once the engine's audio is complete; a
// stopped synthesis does not call it (nothing more is to be sent).
func (o *Output) Close() {
	if o.finalised {
		return
	}
	o.finalised = true
	o.buf = o.rs.Flush(o.buf)
	o.drain(true)
	o.res.Complete = true
}

func (o *Output) drain(all bool) {
	for len(o.buf) >= o.min || (all && len(o.buf) > 0) {
		n := min(len(o.buf), o.max)
		chunk := make([]int16, n)
		copy(chunk, o.buf)
		o.buf = o.buf[:copy(o.buf, o.buf[n:])]
		if o.res.Chunks == 0 {
			o.res.FirstChunk = time.Since(o.start)
		}
		o.res.Chunks++
		o.res.Samples += n
		o.emit(chunk)
	}
}
