package fleet_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/fleet"
	"github.com/voiced/voiced/internal/fleet/redistest"
	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
	"github.com/voiced/voiced/internal/stages/sim"
)

// TestLegacyTenantTurnSavedDuringOutageKept: a conversation the previous
// build stored under the plain-hash tenant is resumed here (accepted since
// 099250a); the session saves under the keyed tenant. A turn answered
// while Redis is away is kept here, dirty. Once Redis is back, this
// instance's copy extends Redis's (one more turn): it must win at a load
// and be written again. Conversation.Extends compares the tenants as
// strings, so the legacy copy in Redis was taken for another client's
// and the turn answered during the outage was dropped.
func TestLegacyTenantTurnSavedDuringOutageKept(t *testing.T) {
	const access, secret = "s3cret", "fleet secret"
	srv := redistest.Start(t)
	in := newInstance(t, srv.URL())
	conv := fleet.NewConversations(in.r, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	plain := sha256.Sum256([]byte(access))
	legacy := hex.EncodeToString(plain[:12])
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr, DisableIdentity: true})
	defer raw.Close()
	old, err := json.Marshal(session.Conversation{Tenant: legacy, Turns: []pipeline.Turn{{User: "hello", Assistant: "Hi."}}, Answered: 1})
	require.NoError(t, err)
	require.NoError(t, raw.Set(ctx, "voiced:conv:conv-1", old, time.Minute).Err())

	reg := prometheus.NewRegistry()
	st := sim.New(sim.Config{LLMMedian: time.Millisecond, STTMedian: time.Millisecond, Sigma: -1, SlowShare: -1, FailShare: -1})
	p, err := pipeline.New(pipeline.Config{}, pipeline.Stages{STT: st.STT, Intent: st.Intent, Retrieval: st.Retrieval, LLM: st.LLM}, pipeline.NewMetrics(reg))
	require.NoError(t, err)
	ss := session.NewServer(session.Config{Tokens: []string{access}, ResumeSecret: []byte(secret), Conversations: conv},
		p, slog.New(slog.DiscardHandler), session.NewMetrics(reg))
	hs := httptest.NewServer(ss)
	defer func() { ss.Close(); hs.Close() }()

	// A resume token the previous build issued: tenant the plain hash.
	claims, err := json.Marshal(map[string]any{"c": "conv-1", "t": legacy, "e": time.Now().Add(time.Minute).UnixMilli()})
	require.NoError(t, err)
	payload := base64.RawURLEncoding.EncodeToString(claims)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(payload))
	tok := payload + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(hs.URL, "http")+"?access_token="+access+"&resume="+tok,
		&websocket.DialOptions{Subprotocols: []string{protocol.Name}, HTTPClient: &http.Client{}})
	require.NoError(t, err)
	defer ws.CloseNow()
	var ready protocol.SessionReady
	_, b, err := ws.Read(ctx)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &ready))
	require.True(t, ready.Resumed, "the previous build's conversation")

	srv.Freeze()
	require.Eventually(t, func() bool { return !in.r.Up() }, testTimeout, time.Millisecond)
	frame, err := protocol.EncodeBinaryAudio(nil, protocol.AudioHeader{RequestID: "r1", DeadlineAt: time.Now().Add(5 * time.Second).UnixMilli(), Final: true}, make([]int16, 3200))
	require.NoError(t, err)
	require.NoError(t, ws.Write(ctx, websocket.MessageBinary, frame))
	for {
		typ, b, err := ws.Read(ctx)
		require.NoError(t, err)
		if typ != websocket.MessageText {
			continue
		}
		m, err := protocol.DecodeServer(b)
		require.NoError(t, err)
		if protocol.Terminal(m.Type) {
			require.Equal(t, protocol.TypeResult, m.Type, "%s", b)
			break
		}
	}
	srv.Thaw()
	require.Eventually(t, in.r.Up, testTimeout, time.Millisecond)

	got, ok, err := conv.Load(ctx, "conv-1")
	require.NoError(t, err)
	require.True(t, ok)
	require.Len(t, got.Turns, 2, "the turn answered during the outage")
}
