// Package mulaw is the G.711 μ-law codec telephone media streams carry
// (8000 Hz, one byte a sample): 16-bit linear PCM to μ-law and back.
//
// Encoding is the 16-bit Reese/Campbell form of the ITU-T G.711 segment
// approximation (the form sox descends from): clip the magnitude at 32635,
// add the bias 132, take the segment (exponent) from the top set bit and
// the next four bits as the mantissa, and invert every bit for the wire.
// Decoding returns the middle of the encoded interval, so a round trip is
// within half a quantisation step (4·2^exponent) for |s| ≤ 32635 and
// within 644 at full scale. Silence is 0xFF; a zero-filled buffer is not
// silence: 0x00 decodes to -32124, the loudest negative value.
package mulaw

import "math/bits"

const (
	// Silence is μ-law's encoding of 0. Fill silent μ-law buffers with it,
	// never with zero bytes.
	Silence byte = 0xFF

	bias = 0x84 // 132: makes every segment start at a power of two
	clip = 32635
)

// decodeTable holds Decode for every byte.
var decodeTable = func() (t [256]int16) {
	for i := range t {
		u := ^byte(i)
		v := (int(u&0x0F)<<3 + bias) << ((u & 0x70) >> 4)
		if u&0x80 != 0 {
			t[i] = int16(bias - v)
		} else {
			t[i] = int16(v - bias)
		}
	}
	return t
}()

// Encode returns the μ-law byte for one 16-bit sample.
func Encode(sample int16) byte {
	s := int(sample) // in int: -(-32768) does not fit an int16
	sign := byte(s>>8) & 0x80
	if sign != 0 {
		s = -s
	}
	s = min(s, clip) + bias
	exp := max(bits.Len8(uint8(s>>7))-1, 0)
	mant := byte(s>>(exp+3)) & 0x0F
	return ^(sign | byte(exp)<<4 | mant)
}

// Decode returns the 16-bit sample for one μ-law byte.
func Decode(u byte) int16 { return decodeTable[u] }

// AppendEncode encodes pcm and appends the bytes to dst.
func AppendEncode(dst []byte, pcm []int16) []byte {
	dst = growBytes(dst, len(pcm))
	for _, s := range pcm {
		dst = append(dst, Encode(s))
	}
	return dst
}

// AppendDecode decodes mu and appends the samples to dst.
func AppendDecode(dst []int16, mu []byte) []int16 {
	if n := len(dst) + len(mu); n > cap(dst) {
		d := make([]int16, len(dst), n)
		copy(d, dst)
		dst = d
	}
	for _, u := range mu {
		dst = append(dst, decodeTable[u])
	}
	return dst
}

func growBytes(b []byte, n int) []byte {
	if len(b)+n <= cap(b) {
		return b
	}
	d := make([]byte, len(b), len(b)+n)
	copy(d, b)
	return d
}
