// The per-turn timeline, drawn to scale from a result's timings and
// budget. Time 0 is the arrival of the final frame at the server: the
// moment the deadline's budget starts counting. With server turn
// detection, time 0 is when the server found the end of the turn, and a
// Speech row marks where it judged the speech to start and end (before
// 0: the end of speech is the end-of-turn silence earlier).

const STAGES = [
  { key: 'stt', label: 'STT' },
  { key: 'intent', label: 'Intent' },
  { key: 'retrieval', label: 'Retrieval' },
  { key: 'llm', label: 'LLM' },
  { key: 'tts', label: 'Speech' },
];

// layout computes the bars in ms from the final frame: STT finalises
// first, intent and retrieval run side by side after it, the LLM starts
// when the budget says (effective budget - time left at its start).
export function layout(result, speech) {
  const t = result.timings || {};
  const b = result.budget || {};
  const bars = [];
  const stt = t.stt ?? null;
  const afterSTT = stt ?? 0;
  if (stt !== null) bars.push({ key: 'stt', start: 0, end: stt });
  if (t.intent != null) bars.push({ key: 'intent', start: afterSTT, end: afterSTT + t.intent });
  if (t.retrieval != null) bars.push({ key: 'retrieval', start: afterSTT, end: afterSTT + t.retrieval });
  let llmStart = null;
  if (t.llm != null) {
    if (b.llmStartLeftMs != null && b.effectiveBudgetMs != null) {
      llmStart = b.effectiveBudgetMs - b.llmStartLeftMs;
    } else {
      llmStart = Math.max(afterSTT, ...bars.map((x) => x.end));
    }
    bars.push({ key: 'llm', start: llmStart, end: llmStart + t.llm });
  }
  // Speech starts with the answer (the first sentence is spoken while
  // the LLM streams) and ends with the last audio.
  if (t.tts != null) {
    const start = llmStart ?? Math.max(afterSTT, ...bars.map((x) => x.end));
    bars.push({ key: 'tts', start, end: start + t.tts });
  }
  const firstAudioMs = result.speech && result.speech.audioMs > 0 ? result.speech.firstAudioMs : null;
  const deadline = b.effectiveBudgetMs ?? null;
  const total = t.total ?? 0;
  let speechBar = null;
  if (speech && speech.endMs != null) {
    const end = -(speech.silenceMs ?? 0);
    speechBar = { key: 'speech', start: end - (speech.endMs - speech.startMs), end };
  }
  // The axis runs from lo (0, or the start of the caller's speech) to the
  // latest mark.
  const lo = speechBar ? speechBar.start : 0;
  const span = (Math.max(deadline ?? 0, total, ...bars.map((x) => x.end), 1) - lo) * 1.08;
  // A stage starts only with its minimum left after the reserve: the
  // latest start of each stage, and the reserve before the deadline.
  const reserve = deadline != null && b.reserveMs != null ? b.reserveMs : null;
  const latestStart = {};
  if (reserve != null) {
    for (const [k, min] of Object.entries(b.minimumsMs || {})) latestStart[k] = Math.max(deadline - reserve - min, 0);
  }
  return { bars, deadline, total, span, lo, speech: speechBar, llmStart, llmStartLeftMs: b.llmStartLeftMs ?? null, firstAudioMs, reserve, latestStart };
}

// niceStep picks an axis tick step giving about five ticks.
export function niceStep(span) {
  for (const s of [10, 20, 50, 100, 200, 250, 500, 1000, 2000, 5000]) if (span / s <= 6) return s;
  return 10000;
}

const pct = (ms, span) => `${((100 * ms) / span).toFixed(2)}%`;

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text != null) e.textContent = text;
  return e;
}

// renderTimeline returns the timeline element for a result.
export function renderTimeline(result, speech) {
  const L = layout(result, speech);
  // Positions on the track are from the axis' start, lo.
  const at = (ms) => pct(ms - L.lo, L.span);
  const root = el('figure', 'timeline');
  root.dataset.spanMs = String(L.span);
  if (L.deadline != null) root.dataset.deadlineMs = String(L.deadline);
  const parts = [];
  const grid = el('div', 'tl-grid');
  if (L.speech) {
    const sp = L.speech;
    const row = el('div', 'tl-row');
    row.append(el('span', 'tl-label', 'Caller'));
    const track = el('div', 'tl-track');
    const b = el('div', 'tl-speech');
    b.dataset.startMs = String(Math.round(sp.start));
    b.dataset.endMs = String(Math.round(sp.end));
    b.style.left = at(sp.start);
    b.style.width = pct(sp.end - sp.start, L.span);
    b.title = `speech detected from ${speech.startMs} to ${speech.endMs} ms into the stream; the turn ended ${-sp.end} ms of silence later (0)`;
    track.append(b);
    row.append(track);
    grid.append(row);
    parts.push(`speech ${Math.round(sp.end - sp.start)} ms, ending ${-sp.end} ms before 0`);
  }
  for (const st of STAGES) {
    const bar = L.bars.find((x) => x.key === st.key);
    const row = el('div', 'tl-row');
    row.append(el('span', 'tl-label', st.label));
    const track = el('div', 'tl-track');
    if (bar) {
      const ms = Math.round(bar.end - bar.start);
      const b = el('div', `tl-bar tl-${st.key}`);
      b.dataset.stage = st.key;
      b.dataset.ms = String(ms);
      b.dataset.startMs = String(Math.round(bar.start));
      b.style.left = at(bar.start);
      b.style.width = pct(Math.max(bar.end - bar.start, L.span / 400), L.span);
      b.title = `${st.label}: ${ms} ms, from ${Math.round(bar.start)} to ${Math.round(bar.end)} ms`;
      track.append(b);
      // Timings are whole milliseconds: 0 means under one.
      const v = el('span', 'tl-ms', ms === 0 ? '<1 ms' : `${ms} ms`);
      // Late bars get their label before them, so it never runs off the
      // track on a narrow screen.
      if ((bar.end - L.lo) / L.span > 0.7) {
        v.style.right = pct(L.span + L.lo - bar.start, L.span);
        v.classList.add('tl-ms-before');
      } else {
        v.style.left = at(bar.end);
      }
      track.append(v);
      parts.push(`${st.label} ${ms === 0 ? 'under 1' : ms} ms`);
    } else {
      track.append(el('span', 'tl-skipped', 'not run'));
      parts.push(`${st.label} not run`);
    }
    if (L.reserve != null) {
      const r = el('div', 'tl-reserve');
      r.style.left = at(L.deadline - L.reserve);
      r.style.width = pct(L.reserve, L.span);
      r.title = `reserve: the last ${L.reserve} ms are kept for sending the answer`;
      track.append(r);
    }
    const latest = L.latestStart[st.key];
    if (latest != null) {
      const m = el('div', 'tl-min');
      m.style.left = at(latest);
      m.dataset.ms = String(latest);
      m.title = `${st.label} starts only before ${Math.round(latest)} ms: it needs ${L.deadline - L.reserve - latest} ms before the reserve`;
      track.append(m);
    }
    if (L.deadline != null) {
      const d = el('div', 'tl-deadline');
      d.style.left = at(L.deadline);
      track.append(d);
    }
    if (st.key === 'llm' && L.llmStart != null && L.llmStartLeftMs != null) {
      const m = el('div', 'tl-llmstart');
      m.style.left = at(L.llmStart);
      m.title = `LLM started with ${L.llmStartLeftMs} ms left`;
      track.append(m);
    }
    if (st.key === 'tts' && L.firstAudioMs != null) {
      const m = el('div', 'tl-firstaudio');
      m.style.left = at(L.firstAudioMs);
      m.dataset.ms = String(L.firstAudioMs);
      m.title = `first audio ${L.firstAudioMs} ms after the end of speech`;
      track.append(m);
    }
    row.append(track);
    grid.append(row);
  }
  // The axis, with the deadline and the total marked.
  const axisRow = el('div', 'tl-row tl-axisrow');
  axisRow.append(el('span', 'tl-label', 'ms'));
  const axis = el('div', 'tl-axis');
  const step = niceStep(L.span);
  for (let ms = Math.ceil(L.lo / step) * step; ms <= L.lo + L.span; ms += step) {
    const tick = el('span', 'tl-tick', String(ms));
    tick.style.left = at(ms);
    axis.append(tick);
  }
  axisRow.append(axis);
  grid.append(axisRow);
  root.append(grid);

  const cap = el('figcaption', 'tl-caption');
  const bits = [];
  if (L.speech) bits.push(`speech detected ${speech.startMs}-${speech.endMs} ms into the stream (blue), turn ended at 0`);
  if (L.deadline != null) bits.push(`deadline ${L.deadline} ms after the end of ${L.speech ? 'the turn' : 'speech'} (red line)`);
  if (L.reserve != null) bits.push(`the last ${L.reserve} ms reserved for sending (shaded); a tick marks each stage's latest start`);
  bits.push(`total ${L.total} ms`);
  if (L.llmStartLeftMs != null) bits.push(`LLM started with ${L.llmStartLeftMs} ms left`);
  else bits.push('LLM not started');
  if (L.firstAudioMs != null) bits.push(`first audio at ${L.firstAudioMs} ms (dotted line)`);
  cap.textContent = bits.join(' · ');
  root.append(cap);
  root.setAttribute('aria-label', `Timeline: ${parts.join(', ')}; ${bits.join(', ')}.`);
  return root;
}
