package resample

import (
	"encoding/binary"
	"slices"
	"testing"
)

// FuzzProcess: a client's audio reaches the resampler in frames of any
// length it chooses (odd ones too), at any of the rates it may declare.
// Whatever the samples and however they are cut, the output is the same
// as for the stream in one piece, a stream of n samples gives
// ceil(n*out/in) once flushed, and a resampler reset, or another from the
// same Filters, gives the same again.
func FuzzProcess(f *testing.F) {
	// The client rates (protocol.SupportedSampleRates), which are also
	// the speech output's and the detectors' rates.
	rates := []int{8000, 16000, 22050, 24000, 44100, 48000}
	var filters Filters
	pcm := func(n int, v int16) []byte {
		b := make([]byte, 2*n)
		for i := range n {
			binary.LittleEndian.PutUint16(b[2*i:], uint16(v*int16(i%7-3)))
		}
		return b
	}
	f.Add(uint8(4), uint8(1), pcm(441, 9000), []byte{1, 2, 3})        // 44.1 kHz to 16 kHz
	f.Add(uint8(0), uint8(5), pcm(160, 32767), []byte{160})           // 8 kHz to 48 kHz
	f.Add(uint8(5), uint8(0), pcm(961, -32768), []byte{0, 255, 7, 1}) // odd frame lengths
	f.Add(uint8(2), uint8(3), append(pcm(100, 1), 0x7f), []byte{})    // an odd byte left over
	f.Add(uint8(1), uint8(1), pcm(320, 100), []byte{13})              // same rate: passed through
	f.Add(uint8(3), uint8(2), []byte{}, []byte{1})                    // an empty stream
	f.Fuzz(func(t *testing.T, from, to uint8, data, cuts []byte) {
		in, out := rates[int(from)%len(rates)], rates[int(to)%len(rates)]
		// At most 32768 samples (0.7 s at 48 kHz, past the largest chunk
		// a resampler keeps): longer streams check nothing more, and
		// each took the fuzzer seconds.
		x := make([]int16, min(len(data)/2, 1<<15))
		for i := range x {
			x[i] = int16(binary.LittleEndian.Uint16(data[2*i:]))
		}
		r, err := filters.Get(in, out)
		if err != nil {
			t.Fatal(err)
		}
		whole := r.Flush(r.Process(nil, x))
		if want := (len(x)*out + in - 1) / in; len(whole) != want {
			t.Fatalf("%d samples from %d to %d Hz: %d out, want %d", len(x), in, out, len(whole), want)
		}
		if in == out && !slices.Equal(whole, x) {
			t.Fatalf("%d Hz to itself changed the samples", in)
		}

		r.Reset()
		var parts []int16
		for i, c := 0, 0; i < len(x); c++ {
			n := len(x) - i // the rest at once when the cuts run out
			if c < len(cuts) {
				n = min(int(cuts[c]), n) // 0: an empty frame
			}
			parts = r.Process(parts, x[i:i+n])
			i += n
		}
		if parts = r.Flush(parts); !slices.Equal(parts, whole) {
			t.Fatalf("%d samples from %d to %d Hz, cut at %v: differs from the whole stream", len(x), in, out, cuts)
		}

		r2, err := filters.Get(in, out)
		if err != nil {
			t.Fatal(err)
		}
		if again := r2.Flush(r2.Process(nil, x)); !slices.Equal(again, whole) {
			t.Fatalf("another resampler from %d to %d Hz gives other samples", in, out)
		}
	})
}
