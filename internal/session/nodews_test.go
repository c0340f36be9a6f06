package session_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/session"
)

// nodeWSClient connects with Node's ws library, offering the
// subprotocols in argv[2] (comma-separated; empty for none), and prints
// one JSON line: the negotiated protocol and first message, or the HTTP
// status and body of a refusal, or the error.
const nodeWSClient = `
const WebSocket = require('ws');
const offer = process.argv[2] ? process.argv[2].split(',') : [];
const ws = new WebSocket(process.argv[1], offer);
let reported = false;
const done = (o) => {
  if (!reported) console.log(JSON.stringify(o));
  reported = true;
  ws.terminate();
};
ws.on('message', (data) => done({protocol: ws.protocol, first: JSON.parse(data.toString()).type}));
ws.on('unexpected-response', (req, res) => {
  let body = '';
  res.on('data', (c) => { body += c; });
  res.on('end', () => done({status: res.statusCode, body}));
});
ws.on('error', (err) => done({error: err.message}));
`

// nodeWS returns the node binary and an environment in which it finds
// the ws library (Debian's node-ws installs it in /usr/share/nodejs), or
// skips the test.
func nodeWS(t *testing.T) (string, []string) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not installed (apt-get install nodejs): skipping the Node ws client test")
	}
	env := append(os.Environ(), "NODE_PATH="+strings.Join(filepath.SplitList(os.Getenv("NODE_PATH")+":/usr/share/nodejs"), ":"))
	cmd := exec.Command(node, "-e", "require.resolve('ws')")
	cmd.Env = env
	if cmd.Run() != nil {
		t.Skip("Node's ws library not installed (apt-get install node-ws): skipping the Node ws client test")
	}
	return node, env
}

// TestNodeWSSubprotocol: Node's ws library, which drops a connection whose
// server answers without the subprotocol it offered, gets voiced.v1; one
// offering only another subprotocol gets the 400 and its explanation.
func TestNodeWSSubprotocol(t *testing.T) {
	node, env := nodeWS(t)
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{})
	url := "ws" + strings.TrimPrefix(h.http.URL, "http")
	type outcome struct {
		Protocol string `json:"protocol"`
		First    string `json:"first"`
		Status   int    `json:"status"`
		Body     string `json:"body"`
		Error    string `json:"error"`
	}
	for _, tc := range []struct {
		offer string
		want  outcome
	}{
		{"voiced.v1", outcome{Protocol: "voiced.v1", First: "session.ready"}},
		{"", outcome{Protocol: "", First: "session.ready"}},
		{"foo,voiced.v1", outcome{Protocol: "voiced.v1", First: "session.ready"}},
		{"foo", outcome{Status: 400, Body: "unsupported WebSocket subprotocol foo: this server speaks voiced.v1 " +
			"(offer it in Sec-WebSocket-Protocol, or offer none)\n"}},
	} {
		t.Run("offer "+tc.offer, func(t *testing.T) {
			// Not h.ctx: its bound covers the whole test, and Node takes
			// seconds to start on a busy machine, four times here.
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, "-e", nodeWSClient, url, tc.offer)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			var got outcome
			require.NoError(t, json.Unmarshal(out, &got), "%s", out)
			require.Equal(t, tc.want, got)
		})
	}
}
