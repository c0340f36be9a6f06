package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/voiced/voiced/client"
)

// Example sends one utterance and prints the answer as it streams. The
// audio would come from a microphone or a file: 16-bit mono PCM at the
// session's rate, in 20 ms frames.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
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
	var frames [][]int16 // the utterance, 320 samples (20 ms at 16 kHz) a frame
	deadline := c.DeadlineIn(1500 * time.Millisecond)
	for i, pcm := range frames {
		f := client.Frame{PCM: pcm, Final: i == len(frames)-1, DeadlineAt: deadline}
		if err := req.Send(ctx, f); err != nil {
			log.Fatal(err)
		}
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
