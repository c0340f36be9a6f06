package loadgen

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"time"

	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/wav"
)

// FrameDuration is the length of one audio frame sent.
const FrameDuration = 20 * time.Millisecond

// Utterance is audio to send as one request.
type Utterance struct {
	Name       string
	SampleRate int
	Samples    []int16
}

// Duration is the utterance's length.
func (u Utterance) Duration() time.Duration {
	return time.Duration(len(u.Samples)) * time.Second / time.Duration(u.SampleRate)
}

// Frames cuts the utterance into 20 ms frames; the last may be shorter.
// An empty utterance is one empty frame, so that it still makes a
// request.
func (u Utterance) Frames() [][]int16 {
	n := u.SampleRate / int(time.Second/FrameDuration)
	var fs [][]int16
	for i := 0; i < len(u.Samples); i += n {
		fs = append(fs, u.Samples[i:min(i+n, len(u.Samples))])
	}
	if len(fs) == 0 {
		fs = append(fs, nil)
	}
	return fs
}

// Synthetic returns a d long utterance at 16 kHz: a 220 Hz tone with its
// harmonics in light noise, loud enough for a voice activity detector.
func Synthetic(d time.Duration, seed uint64) Utterance {
	const rate = protocol.DefaultSampleRate
	n := int(d * rate / time.Second)
	rng := rand.New(rand.NewPCG(seed, 1))
	s := make([]int16, n)
	for i := range s {
		t := float64(i) / rate
		v := 0.25*math.Sin(2*math.Pi*220*t) + 0.12*math.Sin(2*math.Pi*440*t) + 0.06*math.Sin(2*math.Pi*660*t)
		v += 0.03 * rng.NormFloat64()
		s[i] = int16(max(-1, min(1, v)) * math.MaxInt16)
	}
	return Utterance{Name: fmt.Sprintf("synthetic-%v", d), SampleRate: rate, Samples: s}
}

// ErrWAV is wrapped by every error about a WAV file's content.
var ErrWAV = errors.New("unsupported WAV")

// LoadWAV reads a WAV file of 16-bit PCM (mixed down to mono) at a sample
// rate protocol v1 supports.
func LoadWAV(path string) (Utterance, error) {
	f, err := os.Open(path)
	if err != nil {
		return Utterance{}, fmt.Errorf("load wav: %w", err)
	}
	defer f.Close()
	u, err := ReadWAV(f)
	if err != nil {
		return Utterance{}, fmt.Errorf("load wav %s: %w", path, err)
	}
	u.Name = path
	return u, nil
}

// ReadWAV parses a RIFF WAVE stream of 16-bit PCM (several channels are
// mixed down to mono) at a sample rate protocol v1 supports.
func ReadWAV(r io.Reader) (Utterance, error) {
	pcm, rate, err := wav.Decode(r)
	if err != nil {
		return Utterance{}, fmt.Errorf("%w: %w", ErrWAV, err)
	}
	if !protocol.SampleRateSupported(rate) {
		return Utterance{}, fmt.Errorf("%w: sample rate %d, want one of %v", ErrWAV, rate, protocol.SupportedSampleRates)
	}
	if len(pcm) == 0 {
		return Utterance{}, fmt.Errorf("%w: no samples", ErrWAV)
	}
	return Utterance{SampleRate: rate, Samples: pcm}, nil
}

// WriteWAV writes u as a 16-bit PCM mono WAV file, for tests and for
// saving the synthetic utterance.
func WriteWAV(w io.Writer, u Utterance) error {
	_, err := w.Write(wav.Encode(u.Samples, u.SampleRate))
	return err
}
