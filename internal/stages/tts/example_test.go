//go:build cgo && !noflite

package tts_test

import (
	"context"
	"fmt"
	"time"

	"github.com/voiced/voiced/internal/stages/tts"
	"github.com/voiced/voiced/internal/stages/tts/sentence"
)

// How the pipeline speaks a streamed answer: each sentence is synthesised
// as soon as the splitter completes it, and what the listener heard after
// some playback is found from the sentences' audio lengths and word
// timings.
func Example() {
	eng, err := tts.New(tts.Config{}, nil, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	type spoken struct {
		s     sentence.Sentence
		start time.Duration // where its audio starts in the answer's audio
		res   tts.Result
	}
	var said []spoken
	var audio time.Duration
	speak := func(ss []sentence.Sentence) {
		for _, s := range ss {
			res, err := eng.Synthesize(ctx, tts.Request{Text: s.Text, SampleRate: 16000}, func(pcm []int16) {
				// send pcm as answer.audio
			})
			if err != nil {
				fmt.Println(err)
				return
			}
			said = append(said, spoken{s, audio, res})
			audio += res.Audio()
		}
	}
	var sp sentence.Splitter
	answer := ""
	for _, delta := range []string{"Your order", " shipped yesterday. It should", " arrive on Friday."} {
		answer += delta
		speak(sp.Feed(delta))
	}
	speak(sp.Flush())

	// The client reports playback stopped just after "It should".
	played := said[1].start + said[1].res.Words[1].End
	heard := 0
	for _, sp := range said {
		if played > sp.start {
			heard = sp.s.Offset + sp.res.Heard(played-sp.start)
		}
	}
	fmt.Println(len(said), "sentences")
	fmt.Printf("heard: %q\n", answer[:heard])
	// Output:
	// 2 sentences
	// heard: "Your order shipped yesterday. It should"
}
