package session_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
)

// TestUnknownVoiceQuotedWhole: the error for an unknown voice quotes the
// voice cut at a character's start, as every error quoting the client's
// input does. It was cut at byte 40, mid-character for a name of
// two-byte letters, which the client received as U+FFFD.
func TestUnknownVoiceQuotedWhole(t *testing.T) {
	h := speechHarness(t, &fakeStages{}, pipeline.Config{})
	c := h.dial()
	voice := strings.Repeat("x", 39) + strings.Repeat("é", 10)
	c.sendText(`{"type":"session.update","speech":{"voice":"` + voice + `"}}`)
	e := errorOf(t, c.next())
	require.Equal(t, protocol.CodeBadMessage, e.Code)
	require.True(t, utf8.ValidString(e.Message))
	require.NotContains(t, e.Message, "\uFFFD", e.Message)
	require.Contains(t, e.Message, strings.Repeat("x", 39)+"…", e.Message)
	require.Empty(t, c.ping(), "the session stays open")
}
