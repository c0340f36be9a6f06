// voiced.v1 on the client side: the binary audio frame, request ids, the
// error codes in words, and the clock aligned to the server's. See
// docs/protocol.md for the wire format.

export const PROTOCOL = 'voiced.v1';

// Terminal messages: exactly one per request, nothing of it after.
export const TERMINAL = new Set(['result', 'error']);

// encodeAudioFrame builds a binary audio frame: a 4-byte big-endian header
// length, the JSON header, then little-endian 16-bit PCM.
export function encodeAudioFrame({ requestId, deadlineAt, seq, final, sampleRate }, pcm) {
  const header = { type: 'audio', requestId, deadlineAt: Math.round(deadlineAt), seq, final: !!final };
  if (sampleRate) header.sampleRate = sampleRate;
  return binaryFrame(header, pcm);
}

// binaryFrame lays out a frame: header length, JSON header, PCM.
function binaryFrame(header, pcm) {
  const hdr = new TextEncoder().encode(JSON.stringify(header));
  const buf = new ArrayBuffer(4 + hdr.length + pcm.length * 2);
  const view = new DataView(buf);
  view.setUint32(0, hdr.length, false);
  new Uint8Array(buf, 4, hdr.length).set(hdr);
  let off = 4 + hdr.length;
  for (let i = 0; i < pcm.length; i++, off += 2) view.setInt16(off, pcm[i], true);
  return buf;
}

// encodeStreamFrame builds a binary frame of a server-turn session's
// stream: the header carries only seq (docs/protocol.md, "Server turn
// detection"), then little-endian 16-bit PCM.
export function encodeStreamFrame(seq, pcm) {
  return binaryFrame({ seq }, pcm);
}

// decodeAudioFrame is the inverse of encodeAudioFrame, for tests.
export function decodeAudioFrame(buf) {
  const view = new DataView(buf);
  const n = view.getUint32(0, false);
  const header = JSON.parse(new TextDecoder().decode(new Uint8Array(buf, 4, n)));
  const count = (buf.byteLength - 4 - n) / 2;
  const pcm = new Int16Array(count);
  for (let i = 0; i < count; i++) pcm[i] = view.getInt16(4 + n + 2 * i, true);
  return { header, pcm };
}

const ID_RE = /^[A-Za-z0-9._:-]{1,64}$/;

// validRequestId mirrors the server's rule.
export function validRequestId(id) {
  return ID_RE.test(id);
}

// What each error code means, for people.
export const ERROR_TEXT = Object.freeze({
  bad_message: 'The server refused a malformed message.',
  bad_audio: 'The server refused the audio.',
  deadline_exceeded: 'Deadline exceeded: no answer fitted in the budget.',
  cancelled: 'Cancelled.',
  replaced: 'Replaced by a newer turn (barge-in).',
  interrupted: 'Interrupted: you spoke again while it was being answered.',
  overloaded: 'The server is overloaded: too many turns in flight.',
  rate_limited: 'Rate limited: try again shortly.',
  policy_blocked: 'Blocked by policy.',
  unavailable: 'The service is unavailable (shutting down or a provider is down).',
  internal: 'Internal server error.',
});

// What each degradation reason means, for people. Generators may report
// reasons not listed here; they are shown as they are.
export const DEGRADATION_TEXT = Object.freeze({
  stt_partial: 'speech recognition ran out of time; the last partial transcript was used',
  stt_timeout: 'speech recognition ran out of time before any word: asked to say it again',
  turn_cut: 'the turn reached the longest audio a request may have and the server ended it there',
  stt_busy: 'the recogniser was busy and used its quicker search: a few more word errors are possible',
  intent_skipped: 'too little time left to classify the intent',
  intent_timeout: 'the intent classifier ran out of its budget',
  retrieval_skipped: 'too little time left to retrieve articles',
  retrieval_timeout: 'retrieval ran out of its budget',
  retrieval_failed: 'retrieval failed',
  llm_skipped: 'too little time left to start the answer generator: templated answer',
  llm_timeout: 'the answer generator ran out of its budget',
  llm_failed: 'the answer generator failed: templated answer',
  llm_empty: 'the answer generator returned nothing: templated answer',
  stream_interrupted: 'the answer stream broke after some text was sent',
  speech_truncated: 'the spoken answer stops early (no time left, or the connection could not keep up); the text is whole',
  speech_skipped: 'no time to speak even the first sentence: text only',
});

// nowMs is the client's clock in integer milliseconds since the epoch. It
// is monotonic within the page (timeOrigin + performance.now()), so a
// wall-clock step on the client does not jolt the alignment.
export function nowMs() {
  return Math.round(performance.timeOrigin + performance.now());
}

// ServerClock estimates the server's clock from session.ready and
// ping/pong round trips. Each pong gives offset = serverTime - midpoint of
// the round trip, wrong by at most half the round trip; the estimate is
// the sample with the shortest round trip among the recent ones, the
// classic NTP-style filter.
export class ServerClock {
  constructor(keep = 8) {
    this.keep = keep;
    this.reset();
  }

  reset() {
    this.samples = [];
    this.offset = 0;
    this.rtt = Infinity;
    this.aligned = false;
  }

  // fromReady takes session.ready's serverTime, received at recvAt: a
  // first estimate, wrong by the one-way latency until a pong comes.
  fromReady(serverTime, recvAt) {
    if (this.samples.length === 0) {
      this.offset = serverTime - recvAt;
      this.aligned = true;
    }
  }

  // fromPong takes one round trip.
  fromPong(clientTime, serverTime, recvAt) {
    const rtt = recvAt - clientTime;
    if (rtt < 0) return;
    this.samples.push({ rtt, offset: serverTime - (clientTime + recvAt) / 2 });
    if (this.samples.length > this.keep) this.samples.shift();
    let best = this.samples[0];
    for (const s of this.samples) if (s.rtt < best.rtt) best = s;
    this.offset = best.offset;
    this.rtt = best.rtt;
    this.aligned = true;
  }

  // serverNow is the estimated server time, in integer milliseconds.
  serverNow(at = nowMs()) {
    return Math.round(at + this.offset);
  }
}
