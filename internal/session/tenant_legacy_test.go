package session_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/session"
)

// TestResumeTokenOfPreviousBuild: builds before 2026-12-06 named a
// client's tenant by a plain SHA-256 of its access token; today's key it
// with the resume secret. During a rolling deploy a token issued by an
// instance of the previous build (same secret, same access token), and
// the conversation it stored, must stay the client's: they were refused
// as "belongs to another client", and the conversation was lost.
func TestResumeTokenOfPreviousBuild(t *testing.T) {
	const access, secret = "s3cret", "fleet secret"
	store := session.NewMemoryConversations(time.Hour)
	plain := sha256.Sum256([]byte(access))
	legacy := hex.EncodeToString(plain[:12])
	require.NoError(t, store.Save(context.Background(), "conv-1", session.Conversation{Tenant: legacy,
		Turns: []pipeline.Turn{{User: "where is my order", Assistant: "It ships today."}}, Answered: 1}))
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{Tokens: []string{access}, ResumeSecret: []byte(secret), Conversations: store})

	data, err := json.Marshal(map[string]any{"c": "conv-1", "t": legacy, "e": time.Now().Add(time.Minute).UnixMilli()})
	require.NoError(t, err)
	payload := base64.RawURLEncoding.EncodeToString(data)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(payload))
	tok := payload + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
	base := "ws" + strings.TrimPrefix(h.http.URL, "http") + "?access_token=" + access + "&resume="
	c := h.dialURL(base + tok)
	require.True(t, c.ready.Resumed, "the previous build's conversation")
	require.Equal(t, "conv-1", c.ready.ConversationID)

	// The token issued now keeps that form (so does every copy of the
	// history), and resumes too.
	c.conn.CloseNow()
	c2 := h.dialURL(base + c.ready.ResumeToken)
	require.True(t, c2.ready.Resumed)
	require.Equal(t, "conv-1", c2.ready.ConversationID)
}
