// Playback of spoken answers. answer.audio chunks are scheduled back to
// back on one AudioContext's clock, so an answer plays without gaps
// however its chunks arrive; the player knows how much of the answer has
// been heard, for the `playback` report that cuts the assistant's turn in
// the session's history to what the user heard.

// LEAD_S is how far ahead of now the first chunk of an answer starts:
// enough for the next chunks to arrive and queue behind it, small
// against the time to first audio the page shows.
const LEAD_S = 0.05;

// playedMs is how much of an answer's audio has been heard at time now
// (seconds on the audio clock), given its scheduled segments
// [{start, dur}] in seconds: each counts up to its own length, so a gap
// left by a late chunk is not counted as heard.
export function playedMs(segments, now) {
  let s = 0;
  for (const seg of segments) s += Math.min(Math.max(now - seg.start, 0), seg.dur);
  return Math.round(s * 1000);
}

// latencyS is how long after its time on the audio clock a sample is
// heard: the AudioContext's outputLatency where the browser reports it,
// else its baseLatency, never negative. Without it the playback report
// counted as heard the audio still on its way to the speaker.
export function latencyS(ctx) {
  const out = ctx.outputLatency;
  const l = Number.isFinite(out) && out > 0 ? out : ctx.baseLatency;
  return Number.isFinite(l) ? Math.max(l, 0) : 0;
}

// toFloat turns 16-bit PCM into Web Audio samples.
export function toFloat(pcm) {
  const out = new Float32Array(pcm.length);
  for (let i = 0; i < pcm.length; i++) out[i] = pcm[i] / 32768;
  return out;
}

// Player plays one answer at a time. The AudioContext is made on unlock,
// which must run in a user gesture (browsers start audio only then).
export class Player {
  constructor() {
    this.ctx = null;
    this.cur = null; // {requestId, segments, sources, end, final}
    this.heardMs = 0; // total heard over the page's life, answers before cur
  }

  unlock() {
    if (!this.ctx) this.ctx = new AudioContext();
    if (this.ctx.state === 'suspended') this.ctx.resume();
  }

  // heardTime is the audio clock's time of what is heard now.
  heardTime() {
    return this.ctx.currentTime - latencyS(this.ctx);
  }

  // playing reports whether an answer is audible now or still to come.
  get playing() {
    if (!this.cur || !this.ctx) return false;
    return !this.cur.final || this.heardTime() < this.cur.end;
  }

  get requestId() {
    return this.cur ? this.cur.requestId : null;
  }

  // totalHeardMs is the audio heard over the page's life: the demo shows
  // it, and the browser test watches it grow.
  get totalHeardMs() {
    return this.heardMs + (this.cur && this.ctx ? playedMs(this.cur.segments, this.heardTime()) : 0);
  }

  // push schedules one chunk of requestId's answer; a chunk of another
  // answer ends the one playing first.
  push(requestId, pcm, sampleRate, final) {
    if (!this.ctx) this.unlock();
    if (this.cur && this.cur.requestId !== requestId) this.stop();
    if (!this.cur) this.cur = { requestId, segments: [], sources: [], end: 0, final: false };
    const cur = this.cur;
    cur.final = cur.final || final;
    if (pcm.length === 0) return;
    const buf = this.ctx.createBuffer(1, pcm.length, sampleRate);
    buf.copyToChannel(toFloat(pcm), 0);
    const src = this.ctx.createBufferSource();
    src.buffer = buf;
    src.connect(this.ctx.destination);
    const start = Math.max(this.ctx.currentTime + (cur.segments.length ? 0 : LEAD_S), cur.end);
    src.start(start);
    cur.segments.push({ start, dur: buf.duration });
    cur.sources.push(src);
    cur.end = start + buf.duration;
    src.onended = () => {
      const i = cur.sources.indexOf(src);
      if (i >= 0) cur.sources.splice(i, 1);
    };
  }

  // end says that no more audio will come for requestId (its request has
  // its terminal message, or its connection is gone): a request that is
  // cancelled, replaced, interrupted or cut off gets no final chunk, and
  // the answer would otherwise count as playing for ever.
  end(requestId) {
    if (this.cur && this.cur.requestId === requestId) this.cur.final = true;
  }

  // stop silences the answer playing at once and returns
  // {requestId, playedMs, complete}, or null when none was.
  stop() {
    const cur = this.cur;
    if (!cur) return null;
    this.cur = null;
    const now = this.heardTime();
    for (const src of cur.sources) {
      src.onended = null;
      src.stop();
    }
    const played = playedMs(cur.segments, now);
    this.heardMs += played;
    const complete = cur.final && now >= cur.end;
    return { requestId: cur.requestId, playedMs: played, complete };
  }
}
