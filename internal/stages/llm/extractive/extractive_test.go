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
