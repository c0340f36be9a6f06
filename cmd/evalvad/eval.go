package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"

	"github.com/voiced/voiced/internal/domain"
	"github.com/voiced/voiced/internal/stages/stt/lm"
	"github.com/voiced/voiced/internal/stages/stt/sphinx"
	"github.com/voiced/voiced/internal/stages/stt/sttest"
	"github.com/voiced/voiced/internal/vad"
)

// turn is one detected turn; positions are samples at the stream rate.
type turn struct {
	start, end int64 // where speech was judged to start and end
	at         int64 // where the end was decided
	from       int64 // where the turn's audio (pre-roll included) starts
	audio      []int16
}

// detect runs the endpointer over a whole stream, 20 ms at a time as a
// client sends it, and returns the turns and the share of frames the
// energy gate decided without the GMM.
func detect(o options, s setting, pcm []int16) ([]turn, float64, error) {
	w, err := vad.NewWebRTC(o.rate, s.mode)
	if err != nil {
		return nil, 0, err
	}
	w.Smoothed = s.smoothed
	g, err := vad.NewGate(w, o.rate, vad.GateConfig{MarginDB: s.margin, ForegroundDB: s.fg, AskEveryFrame: s.askAll})
	if err != nil {
		w.Close()
		return nil, 0, err
	}
	e, err := vad.NewEndpointer(g, o.rate, o.cfg)
	if err != nil {
		g.Close()
		return nil, 0, err
	}
	defer e.Close()
	var turns []turn
	handle := func(evs []vad.Event) {
		for _, ev := range evs {
			switch ev.Kind {
			case vad.SpeechStarted:
				turns = append(turns, turn{start: ev.Pos, from: ev.From, audio: ev.Audio})
			case vad.TurnAudio:
				t := &turns[len(turns)-1]
				t.audio = append(t.audio, ev.Audio...)
			case vad.SpeechStopped:
				t := &turns[len(turns)-1]
				t.end, t.at = ev.Pos, ev.At
			}
		}
	}
	fl := vad.FrameLen(o.rate)
	for i := 0; i < len(pcm); i += fl {
		evs, err := e.Write(pcm[i:min(i+fl, len(pcm))])
		if err != nil {
			return nil, 0, err
		}
		handle(evs)
	}
	handle(e.Flush())
	skipped, sure, frames := g.Skipped()
	return turns, float64(skipped+sure) / float64(max(frames, 1)), nil
}

// rngFor gives every (condition, voice) its own reproducible noise
// offsets, gaps and clicks, the same for every setting and for -wer.
func rngFor(o options, cond, voice string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(cond + "\x00" + voice))
	return rand.New(rand.NewPCG(o.seed, h.Sum64()))
}

// mixDetect mixes a stream under a condition (the same audio for every
// setting and for -wer) and detects its turns.
func mixDetect(ctx context.Context, o options, src *sources, s setting, str stream, cname string) ([]int16, []truth, []turn, float64, error) {
	pcm, truths, err := mix(ctx, o, src, str, conditions[cname], rngFor(o, cname, str.voice.Name))
	if err != nil {
		return nil, nil, nil, 0, err
	}
	turns, skipped, err := detect(o, s, pcm)
	return pcm, truths, turns, skipped, err
}

func overlaps(t turn, u truth) bool { return t.start < u.speech && t.end > u.speechStart }

type turnStats struct {
	utts, turns, missed, false_, split, merged int
	startOff, endErr, endLat                   []float64 // ms
	skipped                                    float64
	streams                                    int
}

// score matches turns to utterances.
func (st *turnStats) score(o options, cond, voice string, turns []turn, truths []truth) {
	ms := func(samples int64) float64 { return float64(samples) * 1000 / float64(o.rate) }
	st.utts += len(truths)
	st.turns += len(turns)
	for _, t := range turns {
		n := 0
		for _, u := range truths {
			if overlaps(t, u) {
				n++
			}
		}
		switch {
		case n == 0:
			st.false_++
			if o.verbose {
				fmt.Fprintf(os.Stderr, "%s %s: false turn %.2f-%.2f s\n", cond, voice, ms(t.start)/1000, ms(t.end)/1000)
			}
		case n > 1:
			st.merged++
		}
	}
	for _, u := range truths {
		var hit []turn
		for _, t := range turns {
			if overlaps(t, u) {
				hit = append(hit, t)
			}
		}
		if len(hit) == 0 {
			st.missed++
			if o.verbose {
				fmt.Fprintf(os.Stderr, "%s %s: missed %q at %.2f s\n", cond, voice, u.text, ms(u.speechStart)/1000)
			}
			continue
		}
		if len(hit) > 1 {
			st.split++
		}
		first, last := hit[0], hit[len(hit)-1]
		st.startOff = append(st.startOff, ms(first.start-u.speechStart))
		st.endErr = append(st.endErr, ms(last.end-u.speech))
		st.endLat = append(st.endLat, ms(last.at-u.speech))
	}
}

func evalTurns(ctx context.Context, o options, s setting, streams []stream, src *sources) error {
	fmt.Printf("## Turns: %s\n\n", s)
	fmt.Println("Start offset: detected start of speech minus the true start (negative: early). End error: detected end minus the true end. Decided: when the end of turn was decided (input.speech_stopped), after the true end of speech, in stream time.")
	fmt.Println()
	fmt.Println("| condition | utterances | turns | missed | false | split | merged | start offset p50 / p95 ms | end error p50 / p95 ms | decided p50 / p95 / max ms | frames without GMM |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	var all turnStats
	for _, cname := range o.conds {
		var st turnStats
		for _, str := range streams {
			_, truths, turns, skipped, err := mixDetect(ctx, o, src, s, str, cname)
			if err != nil {
				return err
			}
			st.score(o, cname, str.voice.Name, turns, truths)
			st.skipped += skipped
			st.streams++
		}
		fmt.Println(st.row(cname))
		if conditions[cname].talker {
			continue // speech, not noise: apart from the total
		}
		all.utts += st.utts
		all.turns += st.turns
		all.missed += st.missed
		all.false_ += st.false_
		all.split += st.split
		all.merged += st.merged
		all.startOff = append(all.startOff, st.startOff...)
		all.endErr = append(all.endErr, st.endErr...)
		all.endLat = append(all.endLat, st.endLat...)
		all.skipped += st.skipped
		all.streams += st.streams
	}
	fmt.Println(all.row("**all but talker**"))
	fmt.Println()
	return nil
}

func (st turnStats) row(name string) string {
	return fmt.Sprintf("| %s | %d | %d | %d | %d | %d | %d | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f / %.0f | %.0f%% |",
		name, st.utts, st.turns, st.missed, st.false_, st.split, st.merged,
		pct(st.startOff, 50), pct(st.startOff, 95), pct(st.endErr, 50), pct(st.endErr, 95),
		pct(st.endLat, 50), pct(st.endLat, 95), pct(st.endLat, 100), 100*st.skipped/float64(max(st.streams, 1)))
}

func pct(x []float64, p float64) float64 {
	if len(x) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(x))
	i := int(p / 100 * float64(len(s)-1))
	return s[i]
}

// evalNoiseOnly counts false turns in noise alone.
func evalNoiseOnly(ctx context.Context, o options, s setting, src *sources) error {
	fmt.Printf("### False turns in noise alone (%g minutes each): %s\n\n", o.noiseMins, s)
	fmt.Println("| noise | false turns | per 5 minutes | frames without GMM |")
	fmt.Println("|---|---|---|---|")
	n := int(o.noiseMins * 60 * streamRate)
	for _, c := range []struct {
		name string
		cond condition
	}{
		{"white -30 dBFS", condition{noise: "white", dbfs: -30}},
		{"pink -30 dBFS", condition{noise: "pink", dbfs: -30}},
		{"brown -30 dBFS", condition{noise: "brown", dbfs: -30}},
		{"white -40 dBFS", condition{noise: "white", dbfs: -40}},
		{"clicks on white -50 dBFS", condition{noise: "white", dbfs: -50, clicks: true}},
	} {
		rng := rngFor(o, "noise-only "+c.name, "")
		x, err := src.noiseAt(ctx, c.cond.noise, c.cond.dbfs, n, rng)
		if err != nil {
			return err
		}
		if c.cond.clicks {
			addClicks(x, rng)
		}
		pcm, err := deliver(o, toPCM(x))
		if err != nil {
			return err
		}
		turns, skipped, err := detect(o, s, pcm)
		if err != nil {
			return err
		}
		fmt.Printf("| %s | %d | %.1f | %.0f%% |\n", c.name, len(turns), float64(len(turns))*5/o.noiseMins, 100*skipped)
	}
	fmt.Println()
	return nil
}

// evalWER compares recognition on the detected turns with recognition on
// the same utterances sent one by one (each clip as synthesised, cut from
// the same mixed stream). Words of an utterance no turn covers count as
// deleted; words recognised in a false turn as inserted.
func evalWER(ctx context.Context, o options, s setting, streams []stream, src *sources) error {
	d, err := domain.LoadOrDefault("")
	if err != nil {
		return err
	}
	cfg := sphinx.Config{Decoders: 1}
	if cfg.Pronunciations, cfg.PronunciationsData, err = d.PronunciationsSource(); err != nil {
		return err
	}
	e, err := sphinx.New(ctx, cfg, d.CorpusSentences(), slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		return err
	}
	defer e.Close()
	fmt.Printf("## Word error rate: detected turns vs one by one (%s; embedded recogniser, default settings)\n\n", s)
	fmt.Println("| condition | voice | one by one | detected turns |")
	fmt.Println("|---|---|---|---|")
	for _, cname := range o.werConds {
		var tOne, tTurn score
		for _, str := range streams {
			pcm, truths, turns, _, err := mixDetect(ctx, o, src, s, str, cname)
			if err != nil {
				return err
			}
			var one, byTurn score
			for _, u := range truths {
				hyp, err := recognise(ctx, e, o.rate, pcm[u.clipStart:u.clipEnd])
				if err != nil {
					return err
				}
				one.add(werOf(o, cname, str.voice.Name, "one", u.text, hyp))
			}
			covered := make([]bool, len(truths))
			for _, t := range turns {
				var ref []string
				for i, u := range truths {
					if overlaps(t, u) {
						ref = append(ref, u.text)
						covered[i] = true
					}
				}
				hyp, err := recognise(ctx, e, o.rate, t.audio)
				if err != nil {
					return err
				}
				byTurn.add(werOf(o, cname, str.voice.Name, "turn", strings.Join(ref, " "), hyp))
			}
			for i, u := range truths {
				if !covered[i] {
					byTurn.add(werOf(o, cname, str.voice.Name, "missed", u.text, ""))
				}
			}
			fmt.Printf("| %s | %s | %s | %s |\n", cname, str.voice.Name, one, byTurn)
			tOne.add(one.errs, one.words)
			tTurn.add(byTurn.errs, byTurn.words)
		}
		fmt.Printf("| %s | **all** | %s | %s |\n", cname, tOne, tTurn)
	}
	fmt.Println()
	return nil
}

func werOf(o options, cond, voice, what, ref, hyp string) (int, int) {
	ref = lm.Normalize(ref)
	errs, n := sttest.WordErrors(ref, hyp)
	if o.verbose && errs > 0 {
		fmt.Fprintf(os.Stderr, "%s %s %s: %d errors\n  ref: %s\n  hyp: %s\n", cond, voice, what, errs, ref, hyp)
	}
	return errs, n
}

// recognise decodes pcm in 20 ms frames, as fast as the recogniser goes.
func recognise(ctx context.Context, e *sphinx.Engine, rate int, pcm []int16) (string, error) {
	r, err := e.Start(ctx, rate)
	if err != nil {
		return "", err
	}
	defer r.Close()
	fr := rate / 50
	for i := 0; i < len(pcm); i += fr {
		if _, err := r.Write(ctx, pcm[i:min(i+fr, len(pcm))]); err != nil {
			return "", err
		}
	}
	return r.Finish(ctx)
}

type score struct{ errs, words int }

func (s *score) add(e, n int) { s.errs += e; s.words += n }
func (s score) String() string {
	if s.words == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%% (%d/%d)", 100*float64(s.errs)/float64(s.words), s.errs, s.words)
}
