package client_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/client"
)

// TestDialRefusesBadConfig: a duration or bound the client cannot honour
// is refused by Dial, with an error naming it, before any connection.
// Before, Dial took them: a negative Reconnect.Max or Initial made the
// client's goroutine panic on the first reconnection (rand.N of a
// negative wait), a KeepAlive under 2 ns made it panic at once (a ticker
// of no interval), a negative WriteTimeout dropped the connection on its
// first write, and a negative MaxWaiting refused every request.
func TestDialRefusesBadConfig(t *testing.T) {
	f := newFake(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		if s := accept(t, w, r, nil); s != nil {
			s.serve(nil)
		}
	})
	for _, tc := range []struct {
		name string
		cfg  client.Config
		want string
	}{
		{"negative DialTimeout", client.Config{DialTimeout: -time.Second}, "DialTimeout"},
		{"negative WriteTimeout", client.Config{WriteTimeout: -time.Second}, "WriteTimeout"},
		{"negative MaxWaiting", client.Config{MaxWaiting: -1}, "MaxWaiting"},
		{"negative ReadLimit (unbounded reads)", client.Config{ReadLimit: -1}, "ReadLimit"},
		{"KeepAlive too short for its ticker", client.Config{KeepAlive: 1}, "KeepAlive"},
		{"negative Reconnect.Initial", client.Config{Reconnect: client.Reconnect{Initial: -time.Second}}, "Reconnect"},
		{"negative Reconnect.Max", client.Config{Reconnect: client.Reconnect{Max: -time.Second}}, "Reconnect"},
		{"negative Reconnect.Attempts", client.Config{Reconnect: client.Reconnect{Attempts: -1}}, "Reconnect"},
		{"negative Reconnect.TerminalGrace", client.Config{Reconnect: client.Reconnect{TerminalGrace: -time.Second}}, "Reconnect"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.URL, cfg.Pings = f.url(), 1
			c, err := client.Dial(testCtx(t), cfg)
			if err == nil {
				c.CloseNow()
			}
			require.ErrorContains(t, err, tc.want)
		})
	}
	require.Empty(t, f.requests(), "a refused configuration dialled")
	// The documented negatives stay allowed: no keep-alive, no pings.
	c, err := client.Dial(testCtx(t), client.Config{URL: f.url(), KeepAlive: -1, Pings: -1})
	require.NoError(t, err)
	c.CloseNow()
}
