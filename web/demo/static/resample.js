// Streaming resampler and PCM helpers. Pure functions and classes with no
// browser APIs, so that the AudioWorklet and the unit tests (node --test)
// share them.

// Resampler converts a stream of Float32 samples from one rate to another
// with a windowed-sinc low-pass filter. Plain decimation (taking every
// third sample of 48 kHz) would fold everything above 8 kHz back into the
// speech band as aliasing, which hurts the recogniser; the filter cuts
// just below the output Nyquist frequency first.
export class Resampler {
  // halfWidth is the filter's half-length in output samples: 16 keeps the
  // transition band narrow at a cost of about 100 multiply-adds per output
  // sample at 48 kHz, negligible next to the audio thread's budget.
  constructor(inRate, outRate, halfWidth = 16) {
    if (!(inRate > 0 && outRate > 0)) {
      throw new RangeError(`bad sample rates ${inRate} -> ${outRate}`);
    }
    this.inRate = inRate;
    this.outRate = outRate;
    this.step = inRate / outRate; // input samples per output sample
    // Cutoff as a fraction of the input Nyquist frequency, a little below
    // the output Nyquist so that the transition band stays inside it.
    this.cutoff = Math.min(1, outRate / inRate) * 0.92;
    this.width = halfWidth / this.cutoff; // half-width in input samples
    this.passthrough = inRate === outRate;
    // Start with a history of zeros so the first output needs no special
    // case; it costs width input samples of latency (about 1 ms).
    const lead = Math.ceil(this.width);
    this.buf = new Float32Array(lead + 4096);
    this.len = lead;
    this.pos = lead; // position of the next output sample, in buf
  }

  // process consumes input and returns the output samples it completes.
  process(input) {
    if (this.passthrough) return Float32Array.from(input);
    this.append(input);
    const out = [];
    const w = this.width;
    const fc = this.cutoff;
    while (this.pos + w < this.len) {
      const p = this.pos;
      const lo = Math.ceil(p - w);
      const hi = Math.floor(p + w);
      let acc = 0;
      let norm = 0;
      for (let k = lo; k <= hi; k++) {
        const d = p - k;
        const h = fc * sinc(fc * d) * (0.5 + 0.5 * Math.cos((Math.PI * d) / w));
        acc += this.buf[k] * h;
        norm += h;
      }
      // Normalising by the tap sum keeps DC gain exactly 1 whatever the
      // fractional phase, so a constant input gives a constant output.
      out.push(norm !== 0 ? acc / norm : 0);
      this.pos += this.step;
    }
    this.compact();
    return Float32Array.from(out);
  }

  append(input) {
    if (this.len + input.length > this.buf.length) {
      const grown = new Float32Array(Math.max(this.buf.length * 2, this.len + input.length));
      grown.set(this.buf.subarray(0, this.len));
      this.buf = grown;
    }
    this.buf.set(input, this.len);
    this.len += input.length;
  }

  // compact drops the input no future output sample can reach.
  compact() {
    const keepFrom = Math.max(0, Math.floor(this.pos - this.width) - 1);
    if (keepFrom === 0) return;
    this.buf.copyWithin(0, keepFrom, this.len);
    this.len -= keepFrom;
    this.pos -= keepFrom;
  }
}

function sinc(x) {
  if (x === 0) return 1;
  const px = Math.PI * x;
  return Math.sin(px) / px;
}

// toPCM16 converts Float32 samples in [-1, 1] to signed 16-bit integers,
// clipping what is outside.
export function toPCM16(f32) {
  const out = new Int16Array(f32.length);
  for (let i = 0; i < f32.length; i++) {
    const s = Math.max(-1, Math.min(1, f32[i]));
    out[i] = s < 0 ? Math.round(s * 0x8000) : Math.round(s * 0x7fff);
  }
  return out;
}

// levelDb is the RMS level of 16-bit samples in dB relative to full scale;
// digital silence is -Infinity.
export function levelDb(pcm) {
  if (pcm.length === 0) return -Infinity;
  let sum = 0;
  for (let i = 0; i < pcm.length; i++) {
    const s = pcm[i] / 32768;
    sum += s * s;
  }
  const rms = Math.sqrt(sum / pcm.length);
  return rms > 0 ? 20 * Math.log10(rms) : -Infinity;
}

// Framer cuts a stream of 16-bit samples into frames of a fixed size.
export class Framer {
  constructor(frameSamples) {
    this.size = frameSamples;
    this.cur = new Int16Array(frameSamples);
    this.n = 0;
  }

  // push adds samples and returns the frames they complete.
  push(pcm) {
    const frames = [];
    let i = 0;
    while (i < pcm.length) {
      const take = Math.min(this.size - this.n, pcm.length - i);
      this.cur.set(pcm.subarray(i, i + take), this.n);
      this.n += take;
      i += take;
      if (this.n === this.size) {
        frames.push(this.cur);
        this.cur = new Int16Array(this.size);
        this.n = 0;
      }
    }
    return frames;
  }
}
