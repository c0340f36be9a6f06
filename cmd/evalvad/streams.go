package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/voiced/voiced/internal/audio/mulaw"
	"github.com/voiced/voiced/internal/audio/resample"
	"github.com/voiced/voiced/internal/stages/stt/sttest"
)

// condition is what is mixed into a stream besides its speech.
type condition struct {
	noise  string  // sox noise type: white, pink, brown; "" none
	dbfs   float64 // the noise's RMS level
	clicks bool    // clicks every 0.3-3 s
	talker bool    // a second talker 20 dB below the first, all the time
}

var conditionOrder = []string{"clean", "white-50", "white-40", "white-30", "pink-40", "pink-30", "brown-40", "brown-30", "clicks", "talker"}

var conditions = map[string]condition{
	"clean":    {},
	"white-50": {noise: "white", dbfs: -50},
	"white-40": {noise: "white", dbfs: -40},
	"white-30": {noise: "white", dbfs: -30},
	"pink-40":  {noise: "pink", dbfs: -40},
	"pink-30":  {noise: "pink", dbfs: -30},
	"brown-40": {noise: "brown", dbfs: -40},
	"brown-30": {noise: "brown", dbfs: -30},
	"clicks":   {noise: "white", dbfs: -50, clicks: true},
	"talker":   {talker: true},
}

func conditionNames() []string { return conditionOrder }

// truth is one utterance in a stream; positions are samples at the
// stream's rate.
type truth struct {
	text                string
	paraphrase          bool
	clipStart, clipEnd  int64 // the synthesised clip, its own silences included
	speechStart, speech int64 // speechStart and the end of speech (speech)
}

// stream is one voice's utterances joined by gaps, clean, at 16 kHz.
type stream struct {
	voice  sttest.Voice
	pcm    []float64
	truths []truth
	talker []float64 // another voice, 20 dB down, as long as pcm
}

// sources makes and caches noise.
type sources struct {
	dir   string
	rate  int
	noise map[string][]int16 // unit-less sox output, per type
}

const streamRate = 16000

// synth16k returns u spoken by v at 16 kHz, set to level dBFS, and where
// its speech starts and ends.
func synth16k(ctx context.Context, v sttest.Voice, text string, level float64) ([]float64, int, int, error) {
	pcm, rate, err := sttest.Synth(ctx, v, text)
	if err != nil {
		return nil, 0, 0, err
	}
	r, err := resample.New(rate, streamRate)
	if err != nil {
		return nil, 0, 0, err
	}
	pcm = r.Flush(r.Process(nil, pcm))
	start, end, active := speechBounds(pcm)
	if end <= start {
		return nil, 0, 0, fmt.Errorf("%s: no speech in %q", v.Name, text)
	}
	gain := math.Pow(10, level/20) * 32768 / active
	x := make([]float64, len(pcm))
	for i, s := range pcm {
		x[i] = float64(s) * gain
	}
	return x, start, end, nil
}

// speechBounds finds where speech starts and ends in a clean clip: the
// first and last 10 ms window within 40 dB of the loudest (and above -60
// dBFS), and returns the RMS of the windows in between that pass the same
// test (the active speech level).
func speechBounds(pcm []int16) (start, end int, activeRMS float64) {
	const w = streamRate / 100
	var pows []float64
	peak := 0.0
	for i := 0; i+w <= len(pcm); i += w {
		var s float64
		for _, v := range pcm[i : i+w] {
			s += float64(v) * float64(v)
		}
		p := s / w
		pows = append(pows, p)
		peak = max(peak, p)
	}
	thr := max(peak*1e-4, math.Pow(10, -6)*32768*32768)
	start, end = -1, -1
	var sum float64
	var n int
	for i, p := range pows {
		if p >= thr {
			if start < 0 {
				start = i * w
			}
			end = (i + 1) * w
			sum += p
			n++
		}
	}
	if n == 0 {
		return 0, 0, 1
	}
	return start, end, math.Sqrt(sum / float64(n))
}

func buildStreams(ctx context.Context, o options, src *sources) ([]stream, error) {
	rng := rand.New(rand.NewPCG(o.seed, 2))
	var out []stream
	for vi, v := range o.voices {
		s := stream{voice: v}
		s.pcm = make([]float64, streamRate) // 1 s lead-in
		for _, u := range sttest.Utterances() {
			x, start, end, err := synth16k(ctx, v, u.Text, speechDBFS)
			if err != nil {
				return nil, err
			}
			at := int64(len(s.pcm))
			s.truths = append(s.truths, truth{u.Text, u.Paraphrase, at, at + int64(len(x)), at + int64(start), at + int64(end)})
			s.pcm = append(s.pcm, x...)
			gap := streamRate + rng.IntN(2*streamRate) // 1-3 s
			s.pcm = append(s.pcm, make([]float64, gap)...)
		}
		s.pcm = append(s.pcm, make([]float64, streamRate)...)
		// The second talker: another voice, the tuning sentences, with
		// short pauses, 20 dB below, looped over the stream.
		other := sttest.Voices[(vi+1)%len(sttest.Voices)]
		if other.Name == v.Name || !other.Available() {
			other = sttest.Voices[(vi+2)%len(sttest.Voices)]
		}
		var talk []float64
		for len(talk) < len(s.pcm) {
			for _, u := range sttest.TuningUtterances() {
				x, _, _, err := synth16k(ctx, other, u.Text, speechDBFS-20)
				if err != nil {
					return nil, err
				}
				talk = append(talk, x...)
				talk = append(talk, make([]float64, streamRate*3/10+rng.IntN(streamRate/2))...)
			}
		}
		s.talker = talk[:len(s.pcm)]
		out = append(out, s)
	}
	return out, nil
}

// noise returns n samples of sox's noise of the given type at dbfs RMS,
// from a random offset of a long recording made once.
func (src *sources) noiseAt(ctx context.Context, typ string, dbfs float64, n int, rng *rand.Rand) ([]float64, error) {
	const seconds = 900
	raw, ok := src.noise[typ]
	if !ok {
		path := filepath.Join(src.dir, typ+".wav")
		cmd := exec.CommandContext(ctx, "sox", "-n", "-r", strconv.Itoa(src.rate), "-b", "16", "-c", "1", path,
			"synth", strconv.Itoa(seconds), typ+"noise", "vol", "0.5")
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("sox %s noise: %w: %s", typ, err, out)
		}
		pcm, _, err := sttest.ReadWAV(path)
		if err != nil {
			return nil, err
		}
		raw = pcm
		src.noise[typ] = raw
	}
	if n > len(raw) {
		return nil, fmt.Errorf("%d samples of noise wanted, %d made", n, len(raw))
	}
	off := rng.IntN(len(raw) - n + 1)
	seg := raw[off : off+n]
	var ss float64
	for _, v := range seg {
		ss += float64(v) * float64(v)
	}
	gain := math.Pow(10, dbfs/20) * 32768 / math.Sqrt(ss/float64(n))
	x := make([]float64, n)
	for i, v := range seg {
		x[i] = float64(v) * gain
	}
	return x, nil
}

// addClicks adds clicks (1-10 ms of decaying noise, peaks -20 to -3
// dBFS) every 0.3-3 s.
func addClicks(x []float64, rng *rand.Rand) int {
	n := 0
	for at := streamRate / 2; at < len(x); at += streamRate*3/10 + rng.IntN(streamRate*27/10) {
		length := streamRate/1000 + rng.IntN(streamRate/100)
		peak := 32768 * math.Pow(10, (-20+17*rng.Float64())/20)
		for i := 0; i < length && at+i < len(x); i++ {
			x[at+i] += peak * math.Exp(-3*float64(i)/float64(length)) * (2*rng.Float64() - 1)
		}
		n++
	}
	return n
}

// mix returns the stream under condition c, as the server would receive
// it: at o.rate, through mu-law if asked; the truths are moved to o.rate.
func mix(ctx context.Context, o options, src *sources, s stream, c condition, rng *rand.Rand) ([]int16, []truth, error) {
	x := make([]float64, len(s.pcm))
	copy(x, s.pcm)
	if c.noise != "" {
		nz, err := src.noiseAt(ctx, c.noise, c.dbfs, len(x), rng)
		if err != nil {
			return nil, nil, err
		}
		for i := range x {
			x[i] += nz[i]
		}
	}
	if c.clicks {
		addClicks(x, rng)
	}
	if c.talker {
		for i := range x {
			x[i] += s.talker[i]
		}
	}
	pcm, err := deliver(o, toPCM(x))
	if err != nil {
		return nil, nil, err
	}
	truths := slices.Clone(s.truths)
	if o.rate != streamRate {
		scale := func(p int64) int64 { return p * int64(o.rate) / streamRate }
		for i := range truths {
			t := &truths[i]
			t.clipStart, t.clipEnd, t.speechStart, t.speech = scale(t.clipStart), scale(t.clipEnd), scale(t.speechStart), scale(t.speech)
		}
	}
	return pcm, truths, nil
}

// deliver turns 16 kHz audio into what the server gets: at o.rate (the
// resampler's low-pass keeps it alias-free), through mu-law if asked.
func deliver(o options, pcm []int16) ([]int16, error) {
	if o.rate != streamRate {
		r, err := resample.New(streamRate, o.rate)
		if err != nil {
			return nil, err
		}
		pcm = r.Flush(r.Process(nil, pcm))
	}
	if o.mulaw {
		pcm = mulaw.AppendDecode(nil, mulaw.AppendEncode(nil, pcm))
	}
	return pcm, nil
}

func toPCM(x []float64) []int16 {
	out := make([]int16, len(x))
	for i, v := range x {
		out[i] = int16(max(-32768, min(32767, math.Round(v))))
	}
	return out
}
