package domain_test

import (
	"context"
	"fmt"
	"time"

	"github.com/voiced/voiced/internal/domain"
	"github.com/voiced/voiced/internal/stages/intent"
	"github.com/voiced/voiced/internal/stages/retrieval"
)

// How voiced wires a domain into its stages: the classifier is trained on
// the intents, retrieval indexes the articles, the domain itself gives the
// templated answers, and CorpusSentences feeds the recogniser's language
// model.
func Example() {
	d, err := domain.LoadOrDefault("") // "" is the embedded help desk; else the -domain folder
	if err != nil {
		fmt.Println(err) // names the file and line of a malformed domain
		return
	}
	// Training takes seconds, minutes under -race on a busy 2-core
	// machine: the context stops it (a signal's, in a server), not a
	// deadline.
	clf, err := intent.New(context.Background(), d.Intents, intent.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	// The bound is for a hang, not for speed.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ix, err := retrieval.Open(ctx, retrieval.Config{}, d.Articles)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ix.Close()

	const transcript = "when will i get my money back"
	in, err := clf.Classify(ctx, transcript)
	if err != nil {
		fmt.Println(err)
		return
	}
	passages, err := ix.Retrieve(ctx, transcript, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(in.Name, in.Confidence > 0.5)
	fmt.Println(passages[0].ID, passages[0].Title)
	fmt.Println(d.Template(in, transcript))
	fmt.Println(len(d.CorpusSentences()) > 500)
	// Output:
	// refund_status true
	// refund-timing#2 When you get your refund
	// Refunds go back to your original payment method within five business days of the return reaching our warehouse. We email you when it's sent.
	// true
}
