package mulaw

import (
	"math"
	"math/bits"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestVectors(t *testing.T) {
	for _, tt := range []struct {
		name string
		pcm  int16
		mu   byte
	}{
		{"most negative (int16 negation would overflow)", math.MinInt16, 0x00},
		{"most positive", math.MaxInt16, 0x80},
		{"zero", 0, 0xFF},
		{"plus one", 1, 0xFF},
		{"minus one", -1, 0x7F},
		{"clip point", 32635, 0x80},
		{"segment 0 top", 123, 0xF0},   // 123+132=255: exponent 0, mantissa 15
		{"segment 1 start", 124, 0xEF}, // 256: exponent 1, mantissa 0
		{"negative segment 1", -124, 0x6F},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Equalf(t, tt.mu, Encode(tt.pcm), "Encode(%d)", tt.pcm)
		})
	}
	for _, tt := range []struct {
		mu  byte
		pcm int16
	}{
		{0xFF, 0},      // silence, +0
		{0x7F, 0},      // -0
		{0x00, -32124}, // full-scale negative: why zero bytes are not silence
		{0x80, 32124},
		{0xF0, 120},
		{0xEF, 132},
	} {
		require.Equalf(t, tt.pcm, Decode(tt.mu), "Decode(%#02x)", tt.mu)
	}
}

// TestRoundTripExhaustive encodes every 16-bit value and checks the
// decoded value is within half of its segment's step (the midpoint rule),
// or within 644 where the encoder clips, and that the encoder is monotonic.
func TestRoundTripExhaustive(t *testing.T) {
	prev := math.MinInt
	for s := math.MinInt16; s <= math.MaxInt16; s++ {
		u := Encode(int16(s))
		d := int(Decode(u))
		mag := min(abs(s), clip) + bias
		exp := max(bits.Len(uint(mag>>7))-1, 0)
		step := 8 << exp
		// t.Fatalf, not require: 65,536 require calls take seconds under -race.
		if abs(s) <= clip && abs(d-s) > step/2 {
			t.Fatalf("sample %d -> %#02x -> %d: more than half a step (%d) off", s, u, d, step)
		}
		if abs(d-s) > 644 {
			t.Fatalf("clipped sample %d -> %d: more than 644 off", s, d)
		}
		if d < prev {
			t.Fatalf("not monotonic at %d: %d after %d", s, d, prev)
		}
		prev = d
	}
}

// TestCodewordsStable: decoding any byte and encoding the result gives a
// byte that decodes to the same value (0x7F, -0, becomes 0xFF, +0).
func TestCodewordsStable(t *testing.T) {
	for i := range 256 {
		v := Decode(byte(i))
		require.Equal(t, v, Decode(Encode(v)), "byte %#02x", i)
	}
}

// TestAgainstContinuousLaw compares the segment approximation with the
// continuous μ-law curve: G.711's 8-segment version tracks it to within a
// few quantisation levels.
func TestAgainstContinuousLaw(t *testing.T) {
	for s := -32000; s <= 32000; s += 97 {
		x := float64(s) / 32768
		f := math.Copysign(math.Log1p(255*math.Abs(x))/math.Log(256), x) // -1..1
		level := int(^Encode(int16(s)) & 0x7F)                           // magnitude level 0..127, 127 loudest
		want := int(math.Round(math.Abs(f) * 127))
		require.InDeltaf(t, want, level, 3, "sample %d", s)
	}
}

func TestAppend(t *testing.T) {
	pcm := []int16{0, 1, -1, 1000, -1000, math.MaxInt16, math.MinInt16}
	mu := AppendEncode([]byte{0xAA}, pcm)
	require.Len(t, mu, 1+len(pcm))
	require.Equal(t, byte(0xAA), mu[0], "appends, keeps what was there")
	back := AppendDecode(nil, mu[1:])
	for i := range pcm {
		require.Equal(t, Decode(Encode(pcm[i])), back[i])
	}
	require.Empty(t, AppendDecode(nil, nil))
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func BenchmarkEncode20ms(b *testing.B) {
	pcm := make([]int16, 160)
	for i := range pcm {
		pcm[i] = int16(10000 * math.Sin(float64(i)/5))
	}
	buf := make([]byte, 0, 160)
	for b.Loop() {
		buf = AppendEncode(buf[:0], pcm)
	}
}

func BenchmarkDecode20ms(b *testing.B) {
	mu := make([]byte, 160)
	for i := range mu {
		mu[i] = byte(i)
	}
	buf := make([]int16, 0, 160)
	for b.Loop() {
		buf = AppendDecode(buf[:0], mu)
	}
}
