package speech

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCheckRate(t *testing.T) {
	for _, r := range SampleRates {
		require.NoError(t, CheckRate(r))
	}
	for _, r := range []int{0, -8000, 11025, 96000} {
		require.ErrorIs(t, CheckRate(r), ErrRate, r)
	}
}

func TestHeard(t *testing.T) {
	// "Hi Dr. Lee" with the words flite would give.
	res := Result{SampleRate: 16000, Samples: 16000, TextLen: 10, Complete: true, Words: []Word{
		{Text: "hi", From: 0, To: 2, Start: 160 * time.Millisecond, End: 300 * time.Millisecond},
		{Text: "doctor", From: 3, To: 6, Start: 300 * time.Millisecond, End: 600 * time.Millisecond},
		{Text: "lee", From: 7, To: 10, Start: 600 * time.Millisecond, End: 850 * time.Millisecond},
	}}
	for _, tt := range []struct {
		played time.Duration
		want   int
	}{
		{0, 0},
		{299 * time.Millisecond, 0},
		{300 * time.Millisecond, 2},
		{700 * time.Millisecond, 6},
		{850 * time.Millisecond, 10},
		{2 * time.Second, 10},
	} {
		require.Equal(t, tt.want, res.Heard(tt.played), tt.played)
	}
	noWords := Result{SampleRate: 24000, Samples: 24000, TextLen: 10, Complete: true}
	require.Equal(t, 0, noWords.Heard(999*time.Millisecond))
	require.Equal(t, 10, noWords.Heard(time.Second))
	require.Equal(t, 0, Result{TextLen: 5}.Heard(time.Second), "no audio, nothing heard")
	noWords.Complete = false
	require.Equal(t, 0, noWords.Heard(time.Hour), "a stopped synthesis without word timings: nothing known heard")
}

func tone(n, rate int, hz float64) []int16 {
	out := make([]int16, n)
	for i := range out {
		out[i] = int16(8000 * math.Sin(2*math.Pi*hz*float64(i)/float64(rate)))
	}
	return out
}

func TestOutputChunks(t *testing.T) {
	var f Filters
	for _, tt := range []struct {
		name             string
		in, out          int
		minChunk         time.Duration
		writes           []int // native samples per write
		wantMinChunk     int   // every chunk but the last at least this
		wantSamplesRange [2]int
	}{
		{"same rate, aggregated", 16000, 16000, MaxChunk, []int{256, 256, 1000, 5000, 300, 16000}, 3200, [2]int{22812, 22812}},
		{"down to 8k, aggregated", 16000, 8000, 100 * time.Millisecond, []int{256, 256, 1000, 5000, 300, 16000}, 800, [2]int{11400, 11420}},
		{"up to 48k, as it comes", 24000, 48000, 0, []int{1, 999, 24000, 7}, 1, [2]int{50000, 50030}},
		{"kal to 24k", 8000, 24000, MaxChunk, []int{128, 128, 4000}, 4800, [2]int{12760, 12800}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := Result{SampleRate: tt.out}
			var chunks [][]int16
			o, err := f.NewOutput(tt.in, tt.minChunk, time.Now(), &res, func(p []int16) { chunks = append(chunks, p) })
			require.NoError(t, err)
			for _, n := range tt.writes {
				o.Write(tone(n, tt.in, 440))
			}
			o.Close()
			o.Close() // idempotent
			total := 0
			maxN := tt.out * int(MaxChunk/time.Millisecond) / 1000
			for i, c := range chunks {
				require.LessOrEqual(t, len(c), maxN, "chunk %d longer than MaxChunk", i)
				if i < len(chunks)-1 {
					require.GreaterOrEqual(t, len(c), tt.wantMinChunk, "chunk %d", i)
				}
				total += len(c)
			}
			require.Equal(t, total, res.Samples)
			require.Equal(t, len(chunks), res.Chunks)
			require.GreaterOrEqual(t, total, tt.wantSamplesRange[0])
			require.LessOrEqual(t, total, tt.wantSamplesRange[1])
			require.Positive(t, res.FirstChunk)
		})
	}
}

// Going down in rate removes what the lower rate cannot carry instead of
// folding it back: a 6 kHz tone at 16 kHz comes out near silent at 8 kHz.
func TestOutputAntiAliasing(t *testing.T) {
	var f Filters
	res := Result{SampleRate: 8000}
	var out []int16
	o, err := f.NewOutput(16000, 0, time.Now(), &res, func(p []int16) { out = append(out, p...) })
	require.NoError(t, err)
	o.Write(tone(16000, 16000, 6000))
	o.Close()
	var peak int16
	for _, s := range out[400 : len(out)-400] {
		peak = max(peak, s, -s)
	}
	require.Less(t, int(peak), 8, "a 6 kHz tone aliased into the 8 kHz output (peak %d of 8000)", peak)
}

func TestOutputBadRate(t *testing.T) {
	var f Filters
	_, err := f.NewOutput(16000, 0, time.Now(), &Result{SampleRate: 1}, func([]int16) {})
	require.Error(t, err)
}

// BenchmarkOutput measures resampling and chunking one second of audio.
func BenchmarkOutput(b *testing.B) {
	for _, tt := range []struct {
		name    string
		in, out int
	}{{"16k-16k", 16000, 16000}, {"16k-8k", 16000, 8000}, {"16k-48k", 16000, 48000}, {"16k-44k1", 16000, 44100}, {"24k-16k", 24000, 16000}} {
		b.Run(tt.name, func(b *testing.B) {
			var f Filters
			in := tone(tt.in, tt.in, 440)
			for b.Loop() {
				res := Result{SampleRate: tt.out}
				o, err := f.NewOutput(tt.in, 100*time.Millisecond, time.Now(), &res, func([]int16) {})
				if err != nil {
					b.Fatal(err)
				}
				for i := 0; i < len(in); i += 320 {
					o.Write(in[i:min(i+320, len(in))])
				}
				o.Close()
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1e6, "s/audio-s")
		})
	}
}
