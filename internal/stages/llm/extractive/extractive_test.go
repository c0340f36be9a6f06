package extractive_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/stages/llm/extractive"
)

const testTimeout = 10 * time.Second

type templ map[string]string

// Template returns the intent's response, or the fallback (key "") for an
// unknown intent, as the domain package does.
func (t templ) Template(in pipeline.Intent, _ string) string { return t[in.Name] }

var passages = []pipeline.Passage{
	{ID: "kb-2", Title: "Billing", Score: 4.2, Text: "Invoices are sent monthly. You can download invoices from the billing page."},
	{ID: "kb-1", Title: "Password reset", Score: 6.9, Text: "# Resetting your password\nOpen Settings and choose **Security**. Click Reset password, e.g. from the app. A reset link is emailed to you within five minutes.\n- Links expire after one hour"},
}

func TestAnswer(t *testing.T) {
	r := extractive.New(extractive.Config{Templater: templ{"password_reset": "I can help you reset your password.", "": "Sorry, I didn't catch that."}})
	tests := []struct {
		name     string
		req      pipeline.GenerateRequest
		contains []string
		excludes []string
	}{
		{
			name:     "template plus best sentences",
			req:      pipeline.GenerateRequest{Transcript: "how do I reset my password", Intent: pipeline.Intent{Name: "password_reset", Confidence: 0.9}, Passages: passages},
			contains: []string{"I can help you reset your password.", "Click Reset password, e.g. from the app."},
			excludes: []string{"#", "**", "Invoices"},
		},
		{
			name:     "no intent, passages only",
			req:      pipeline.GenerateRequest{Transcript: "where can I download my invoices", Passages: passages},
			contains: []string{"You can download invoices from the billing page."},
			excludes: []string{"password", "didn't catch"},
		},
		{
			name:     "template only",
			req:      pipeline.GenerateRequest{Transcript: "reset password please", Intent: pipeline.Intent{Name: "password_reset"}},
			contains: []string{"I can help you reset your password."},
		},
		{
			name:     "nothing matches",
			req:      pipeline.GenerateRequest{Transcript: "what is the weather"},
			contains: []string{"Sorry, I didn't catch that."},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := r.Answer(tt.req)
			for _, c := range tt.contains {
				require.Contains(t, got, c)
			}
			for _, c := range tt.excludes {
				require.NotContains(t, got, c)
			}
		})
	}
}

func TestGenerateStreamsPieces(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	r := extractive.New(extractive.Config{Templater: templ{"password_reset": "I can help you reset your password."}})
	req := pipeline.GenerateRequest{Transcript: "how do I reset my password", Intent: pipeline.Intent{Name: "password_reset"}, Passages: passages}
	var pieces []string
	gen, err := r.Generate(ctx, req, func(p string) { pieces = append(pieces, p) })
	require.NoError(t, err)
	require.Equal(t, extractive.Name, gen.Provider)
	require.Greater(t, len(pieces), 3)
	require.Equal(t, r.Answer(req), strings.Join(pieces, ""))

	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	_, err = r.Generate(cctx, req, func(string) { t.Fatal("emit after cancel") })
	require.ErrorIs(t, err, context.Canceled)
}

func TestSentences(t *testing.T) {
	require.Equal(t, []string{"Hello there.", "Use e.g. the app.", "Version 2.5 is out!", "List item."},
		extractive.Sentences("Hello there. Use e.g. the app. Version 2.5 is out!\n* List item"))
}

// linker links intents to articles as a domain's intents.yaml does.
type linker struct {
	links    map[string][]string
	passages map[string][]pipeline.Passage
}

func (l linker) IntentArticles(intent string) []string { return l.links[intent] }
func (l linker) Passages(id string) []pipeline.Passage { return l.passages[id] }

// scored is p as retrieval returns it, with a score.
func scored(p pipeline.Passage, score float64) pipeline.Passage { p.Score = score; return p }

// sourceIDs lists the IDs of an answer's sources, nil for none.
func sourceIDs(sources []pipeline.Passage) []string {
	var ids []string
	for _, s := range sources {
		ids = append(ids, s.ID)
	}
	return ids
}

func TestRelevantPassagesOnly(t *testing.T) {
	hours := pipeline.Passage{ID: "hours#1", Title: "Opening hours", Text: "We are closed on public holidays. On Sunday we start at eleven."}
	hours2 := pipeline.Passage{ID: "hours#2", Title: "Opening hours", Text: "Special times are shown a week ahead."}
	cancel := pipeline.Passage{ID: "cancel#1", Title: "Cancelling an order", Text: "You can cancel an order until it ships."}
	mistake := pipeline.Passage{ID: "mistake#1", Title: "Ordered twice", Text: "If you ordered twice, cancel the order you do not want."}
	l := linker{
		links:    map[string][]string{"opening_hours": {"hours"}},
		passages: map[string][]pipeline.Passage{"hours": {hours, hours2}},
	}
	// The intent name's words count as the caller's: "opening", "hours".
	tmpl := templ{"opening_hours": "Our stores are open every day.", "": "Sorry, could you say that again?"}
	tests := []struct {
		name string
		cfg  extractive.Config
		req  pipeline.GenerateRequest
		want string
	}{
		{
			name: "linked intent: unrelated retrieved passages are not quoted, linked ones are",
			cfg:  extractive.Config{Templater: tmpl, Linker: l},
			req: pipeline.GenerateRequest{Transcript: "when do you open on sunday", Intent: pipeline.Intent{Name: "opening_hours"},
				Passages: []pipeline.Passage{scored(cancel, 8), scored(mistake, 7)}},
			want: "Our stores are open every day. On Sunday we start at eleven.",
		},
		{
			name: "linked intent: nothing relevant in its articles, template alone",
			cfg:  extractive.Config{Templater: tmpl, Linker: l},
			req: pipeline.GenerateRequest{Transcript: "hmm okay", Intent: pipeline.Intent{Name: "opening_hours"},
				Passages: []pipeline.Passage{scored(cancel, 8)}},
			want: "Our stores are open every day.",
		},
		{
			name: "the templater is the linker when it is one",
			cfg:  extractive.Config{Templater: linkedTempl{tmpl, l}},
			req: pipeline.GenerateRequest{Transcript: "when do you open on sunday", Intent: pipeline.Intent{Name: "opening_hours"},
				Passages: []pipeline.Passage{scored(cancel, 8)}},
			want: "Our stores are open every day. On Sunday we start at eleven.",
		},
		{
			name: "no link: passages below the minimum score are not quoted",
			cfg:  extractive.Config{Templater: tmpl},
			req: pipeline.GenerateRequest{Transcript: "what about my order",
				Passages: []pipeline.Passage{scored(mistake, 0.04), scored(cancel, 0.03)}},
			want: "Sorry, could you say that again?",
		},
		{
			name: "no link: passages far below the best are not quoted",
			cfg:  extractive.Config{Templater: tmpl},
			req: pipeline.GenerateRequest{Transcript: "i ordered twice can i cancel the order",
				Passages: []pipeline.Passage{scored(mistake, 9), scored(cancel, 3)}},
			want: "If you ordered twice, cancel the order you do not want.",
		},
		{
			name: "no link, minimums turned off: weak passages are quoted",
			cfg:  extractive.Config{Templater: tmpl, MinScore: -1, MinRelativeScore: -1},
			req: pipeline.GenerateRequest{Transcript: "i ordered twice can i cancel the order",
				Passages: []pipeline.Passage{scored(mistake, 0.04), scored(cancel, 0.01)}},
			want: "If you ordered twice, cancel the order you do not want. You can cancel an order until it ships.",
		},
		{
			name: "a sentence repeating the template is not quoted",
			cfg:  extractive.Config{Templater: templ{"cancel_order": "You can cancel an order until it ships."}},
			req: pipeline.GenerateRequest{Transcript: "cancel my order", Intent: pipeline.Intent{Name: "cancel_order"},
				Passages: []pipeline.Passage{scored(cancel, 5)}},
			want: "You can cancel an order until it ships.",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, extractive.New(tt.cfg).Answer(tt.req))
		})
	}
}

// An intent linking several articles: the first answers its usual
// question and is always a candidate; the others are quoted only when
// retrieval found them, and when one of them is the best retrieved, the
// caller asked a rarer question the template does not answer.
func TestLinkedArticlesBeyondTheFirst(t *testing.T) {
	methods := pipeline.Passage{ID: "methods#1", Title: "Payment methods", Text: "We accept Visa, Mastercard and PayPal."}
	methods2 := pipeline.Passage{ID: "methods#2", Title: "Payment methods", Text: "You can pay with two cards."}
	declined := pipeline.Passage{ID: "declined#1", Title: "Declined payments", Text: "If your card is declined, check the expiry date."}
	gift := pipeline.Passage{ID: "gift#1", Title: "Gift cards", Text: "Gift cards never expire and pay for any order."}
	l := linker{
		links:    map[string][]string{"payment_methods": {"methods", "declined", "gift"}},
		passages: map[string][]pipeline.Passage{"methods": {methods, methods2}, "declined": {declined}, "gift": {gift}},
	}
	tmpl := templ{"payment_methods": "We take most cards."}
	pay := func(q string, ps ...pipeline.Passage) pipeline.GenerateRequest {
		return pipeline.GenerateRequest{Transcript: q, Intent: pipeline.Intent{Name: "payment_methods", Confidence: 1}, Passages: ps}
	}
	tests := []struct {
		name    string
		req     pipeline.GenerateRequest
		want    string
		sources []string
	}{
		{name: "usual question: the first article, not an unretrieved later one sharing a word",
			req:  pay("can i pay with my card", scored(methods2, 4), scored(methods, 3)),
			want: "We take most cards. You can pay with two cards.", sources: []string{"methods#2"}},
		{name: "nothing retrieved: the first article only, not a later one that says more of the words",
			req:  pay("does my card expire"),
			want: "We take most cards. You can pay with two cards.", sources: []string{"methods#2"}},
		{name: "a later article retrieved best: its passages, without the template",
			req:  pay("my card was declined", scored(declined, 7), scored(methods, 2)),
			want: "If your card is declined, check the expiry date. You can pay with two cards.", sources: []string{"declined#1", "methods#2"}},
		{name: "a later article retrieved best, the first not at all: the first's passages are left out",
			req:  pay("my mastercard won't go through", scored(declined, 7)),
			want: "If your card is declined, check the expiry date.", sources: []string{"declined#1"}},
		{name: "a later article found by a common word alone (under MinLinkedScore): as if nothing was retrieved",
			req:  pay("does my card expire", scored(gift, 1.2)),
			want: "We take most cards. You can pay with two cards.", sources: []string{"methods#2"}},
		{name: "a later article retrieved behind the first: the template stays",
			req:  pay("can gift cards pay for any order", scored(methods, 6), scored(gift, 5)),
			want: "We take most cards. Gift cards never expire and pay for any order.", sources: []string{"gift#1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, sources := extractive.New(extractive.Config{Templater: tmpl, Linker: l}).Respond(tt.req)
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.sources, sourceIDs(sources))
		})
	}
}

// linkedTempl is a Templater that is also a Linker, as *domain.Domain is.
type linkedTempl struct {
	templ
	linker
}

// A strong retrieved passage from an article the intent does not link
// overrules an intent the classifier is unsure of (its first sentence is
// quoted when none says the caller's words); a template that says
// what the best sentence says gives way to it, so the answer cites its
// article; an out-of-scope question cites a passage that scores as highly.
func TestRetrievalAgainstIntent(t *testing.T) {
	methods := pipeline.Passage{ID: "methods#1", Title: "Payment methods", Text: "We accept Visa, Mastercard and PayPal."}
	declined := pipeline.Passage{ID: "declined#1", Title: "Declined payments", Text: "If your card is declined, check the expiry date."}
	callback := pipeline.Passage{ID: "contact#2", Title: "Contacting a person", Text: "Ask for a call back and someone will call you."}
	l := linker{
		links:    map[string][]string{"payment_methods": {"methods"}},
		passages: map[string][]pipeline.Passage{"methods": {methods}},
	}
	tmpl := templ{"payment_methods": "We accept Visa and Mastercard.", "out_of_scope": "Sorry, I can only help with the shop."}
	pay := func(conf float64, ps ...pipeline.Passage) pipeline.GenerateRequest {
		return pipeline.GenerateRequest{Transcript: "my mastercard won't go through", Intent: pipeline.Intent{Name: "payment_methods", Confidence: conf}, Passages: ps}
	}
	tests := []struct {
		name    string
		cfg     extractive.Config
		req     pipeline.GenerateRequest
		want    string
		sources []string
	}{
		{name: "unsure intent, strong unlinked passage: overruled",
			req:  pay(0.6, scored(declined, 12)),
			want: "If your card is declined, check the expiry date.", sources: []string{"declined#1"}},
		{name: "sure intent: kept",
			req:  pay(0.95, scored(declined, 12)),
			want: "We accept Visa, Mastercard and PayPal.", sources: []string{"methods#1"}},
		{name: "no confidence: kept",
			req:  pay(0, scored(declined, 12)),
			want: "We accept Visa, Mastercard and PayPal.", sources: []string{"methods#1"}},
		{name: "weak unlinked passage: kept",
			req:  pay(0.6, scored(declined, 4)),
			want: "We accept Visa, Mastercard and PayPal.", sources: []string{"methods#1"}},
		{name: "unlinked passage just under the overrule score: kept",
			req:  pay(0.6, scored(declined, extractive.DefaultOverruleScore-0.5)),
			want: "We accept Visa, Mastercard and PayPal.", sources: []string{"methods#1"}},
		{name: "a linked passage retrieved close behind: kept",
			req:  pay(0.6, scored(declined, 12), scored(methods, 7)),
			want: "We accept Visa, Mastercard and PayPal.", sources: []string{"methods#1"}},
		{name: "rule turned off: kept",
			cfg:  extractive.Config{OverruleScore: -1},
			req:  pay(0.6, scored(declined, 12)),
			want: "We accept Visa, Mastercard and PayPal.", sources: []string{"methods#1"}},
		{name: "template restating the best sentence: the sentence, cited",
			req: pipeline.GenerateRequest{Transcript: "do you take mastercard", Intent: pipeline.Intent{Name: "payment_methods", Confidence: 1},
				Passages: []pipeline.Passage{scored(methods, 5)}},
			want: "We accept Visa, Mastercard and PayPal.", sources: []string{"methods#1"}},
		{name: "out of scope, strong passage without the caller's words in its title: quoted",
			req: pipeline.GenerateRequest{Transcript: "can i get a call back", Intent: pipeline.Intent{Name: "out_of_scope", Confidence: 0.7},
				Passages: []pipeline.Passage{scored(callback, 12)}},
			want: "Ask for a call back and someone will call you.", sources: []string{"contact#2"}},
		{name: "out of scope, weaker passage: the response alone",
			req: pipeline.GenerateRequest{Transcript: "can i get a call back", Intent: pipeline.Intent{Name: "out_of_scope", Confidence: 0.7},
				Passages: []pipeline.Passage{scored(callback, 3)}},
			want: "Sorry, I can only help with the shop."},
		{name: "off topic: the response alone, even beside a strong passage",
			req: pipeline.GenerateRequest{Transcript: "can i get a call back", Intent: pipeline.Intent{Name: "out_of_scope", Confidence: 0.7, OffTopic: true},
				Passages: []pipeline.Passage{scored(callback, 12)}},
			want: "Sorry, I can only help with the shop."},
		{name: "out of scope, no sentence says the caller's words: the response alone (the intent's name is no clue)",
			req: pipeline.GenerateRequest{Transcript: "what time is it", Intent: pipeline.Intent{Name: "out_of_scope", Confidence: 0.7},
				Passages: []pipeline.Passage{scored(pipeline.Passage{ID: "times#2", Title: "Delivery time", Text: "Orders are sent out on Monday."}, 3)}},
			want: "Sorry, I can only help with the shop."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Templater, cfg.Linker = tmpl, l
			r := extractive.New(cfg)
			got, sources := r.Respond(tt.req)
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.sources, sourceIDs(sources))
			if tt.req.Intent.OffTopic {
				require.Empty(t, r.Evidence(tt.req), "nor is a provider given evidence")
			}
		})
	}
}
