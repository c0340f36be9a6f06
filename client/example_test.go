package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/voiced/voiced/client"
)

// mic stands for the application's audio source: 20 ms frames of 16-bit
// mono PCM at the session's rate (320 samples at 16 kHz), as they are
// captured, closed at the end of the utterance (a push-to-talk release,
// or the application's own end-of-speech detection).
var mic <-chan []int16

// Example streams one utterance as it is spoken and prints the answer as
// it streams.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, client.Config{URL: "ws://127.0.0.1:8080/v1/session", Token: "secret"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	req, err := c.Open("utt-1", func(ev client.Event) {
		if ev.Type == client.TypeAnswerDelta {
			var d client.AnswerDelta
			if ev.Decode(&d) == nil {
				fmt.Print(d.Text)
			}
		}
	})
	if err != nil {
		log.Fatal(err)
	}
	// The newest frame's deadlineAt governs: set on each frame as it is
	// sent, it makes the answer due 1.5 s after the end of speech, however
	// long the utterance. (One deadline set before the first frame would
	// pass while a long utterance is still being spoken.)
	for pcm := range mic {
		if err := req.Send(ctx, client.Frame{PCM: pcm, DeadlineAt: c.DeadlineIn(1500 * time.Millisecond)}); err != nil {
			log.Fatal(err)
		}
	}
	// The end of the utterance: a final frame, which may carry no samples.
	if err := req.Send(ctx, client.Frame{Final: true, DeadlineAt: c.DeadlineIn(1500 * time.Millisecond)}); err != nil {
		log.Fatal(err)
	}
	term, err := req.Wait(ctx)
	if err != nil {
		log.Fatal(err) // the connection was lost and could not be resumed
	}
	if e, ok := term.Error(); ok {
		log.Fatalf("request failed: %s: %s", e.Code, e.Message)
	}
	var res client.Result
	if err := term.Decode(&res); err != nil {
		log.Fatal(err)
	}
	fmt.Println("\ndegraded:", res.Degraded, res.Degradation)
}
