// Package level measures how loud a frame of 16-bit PCM is, for the
// detectors that decide what is speech: the voice activity detector's
// gate (internal/vad) and the recogniser's choice of the window it
// calibrates on (internal/stages/stt/sphinx).
package level

// Power is the frame's mean square about its mean, in full-scale units
// (1.0 = a full-scale square wave): a DC offset carries no sound, and
// counted as energy it would raise a noise floor and pass for, or gate
// out, speech quieter than the offset. An empty frame has no power.
func Power(frame []int16) float64 {
	if len(frame) == 0 {
		return 0
	}
	var sum, sq int64
	for _, s := range frame {
		sum += int64(s)
		sq += int64(s) * int64(s)
	}
	n := float64(len(frame))
	mean := float64(sum) / n
	return max(float64(sq)/n-mean*mean, 0) / (32768 * 32768)
}
