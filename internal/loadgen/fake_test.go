package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/voiced/voiced/internal/protocol"
)

// fakeServer is a small protocol v1 server for testing voiceload without
// voiced: each request "processes" for proc after its final frame, and
// honours cancel, replacement, supersede, disconnect and its deadline.
// bug makes it break one of the protocol's promises, so that tests can
// check voiceload notices.
type fakeServer struct {
	proc      time.Duration
	maxBudget time.Duration
	// bug makes it break a promise; "behind" keeps every result until the
	// client's next ping and sends it just before the pong, as a client
	// that reads everything late would see it.
	bug      string // "", "duplicate", "missing", "late", "after", "behind"
	token    string // when set, sessions need "Authorization: Bearer token"
	inFlight int    // when set, more requests in flight per session are refused with overloaded
	n        atomic.Int64

	// running counts requests opened and not yet answered, over all
	// sessions; closedBusy counts sessions the client closed while
	// another session's request was running.
	running, closedBusy atomic.Int64
}

var (
	errCauseCancelled = errors.New("cancelled")
	errCauseReplaced  = errors.New("replaced")
)

type fakeReq struct {
	final  chan int64 // the final frame's deadlineAt
	cancel context.CancelCauseFunc
	isFin  bool
}

func (f *fakeServer) start(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/session", f.session)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func (f *fakeServer) session(w http.ResponseWriter, r *http.Request) {
	if f.token != "" && r.Header.Get("Authorization") != "Bearer "+f.token {
		http.Error(w, "no token", http.StatusUnauthorized)
		return
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{protocol.Name}})
	if err != nil {
		return
	}
	defer ws.CloseNow()
	ctx, cancelAll := context.WithCancelCause(r.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancelAll(errors.New("disconnect"))

	send := func(v any) {
		b, _ := json.Marshal(v)
		_ = ws.Write(context.WithoutCancel(ctx), websocket.MessageText, b)
	}
	send(protocol.SessionReady{Type: protocol.TypeSessionReady, Protocol: protocol.Name, SessionID: "s",
		ServerTime: protocol.Millis(time.Now()), MaxBudgetMs: f.maxBudget.Milliseconds(),
		Audio: protocol.AudioFormat{Encoding: protocol.EncodingPCM16LE, SampleRate: 16000, Channels: 1}})
	var (
		mu        sync.Mutex
		reqs      = map[string]*fakeReq{}
		refused   = map[string]bool{}
		supersede bool
		held      []protocol.Result // bug "behind": results not yet sent
	)
	fail := func(id string, code protocol.Code) {
		send(protocol.ErrorMessage{Type: protocol.TypeError, RequestID: id, Code: code, Message: string(code)})
	}
	// failEnded answers a request whose context ended with the code its
	// cause names; other causes (a disconnect) get no answer.
	failEnded := func(id string, rctx context.Context) {
		switch cause := context.Cause(rctx); {
		case errors.Is(cause, errCauseReplaced):
			fail(id, protocol.CodeReplaced)
		case errors.Is(cause, errCauseCancelled):
			fail(id, protocol.CodeCancelled)
			if f.bug == "dupcancel" { // a second terminal message
				fail(id, protocol.CodeCancelled)
			}
		}
	}
	run := func(id string, rq *fakeReq, rctx context.Context) {
		f.running.Add(1)
		var once sync.Once
		answered := func() { once.Do(func() { f.running.Add(-1) }) }
		// Before the terminal is written, so that a client that closes
		// once it has read every terminal finds none running.
		defer answered()
		defer func() {
			mu.Lock()
			if reqs[id] == rq {
				delete(reqs, id)
			}
			mu.Unlock()
			rq.cancel(nil)
		}()
		var deadlineAt int64
		select {
		case <-rctx.Done():
		case deadlineAt = <-rq.final:
		}
		if rctx.Err() != nil {
			answered()
			failEnded(id, rctx)
			return
		}
		deadline := protocol.Time(deadlineAt)
		n := f.n.Add(1)
		if f.bug == "late" {
			deadline = deadline.Add(50 * time.Millisecond)
		}
		give := time.NewTimer(time.Until(deadline.Add(-5 * time.Millisecond)))
		defer give.Stop()
		done := time.NewTimer(f.proc)
		defer done.Stop()
		select {
		case <-rctx.Done():
			answered()
			failEnded(id, rctx)
			return
		case <-give.C:
			answered()
			fail(id, protocol.CodeDeadlineExceeded)
			return
		case <-done.C:
		}
		if f.bug == "missing" && n%3 == 0 {
			return
		}
		if f.bug == "cut" && n%3 == 0 { // the server drops the session mid-request
			_ = ws.Close(websocket.StatusInternalError, "crash")
			return
		}
		send(protocol.Transcript{Type: protocol.TypeTranscript, RequestID: id, Text: "t", Final: true})
		send(protocol.AnswerDelta{Type: protocol.TypeAnswerDelta, RequestID: id, Text: "a"})
		res := protocol.Result{Type: protocol.TypeResult, RequestID: id, Transcript: "t", Answer: "a",
			Degradation: []string{}, Budget: protocol.Budget{DeadlineAt: deadlineAt}}
		if f.bug == "late" {
			res.Budget.DeadlineAt = 0
			wait := time.NewTimer(time.Until(deadline))
			defer wait.Stop()
			<-wait.C
		}
		if f.bug == "behind" {
			mu.Lock()
			held = append(held, res)
			mu.Unlock()
			return
		}
		answered()
		send(res)
		switch {
		case f.bug == "duplicate" && n%3 == 0:
			send(res)
		case f.bug == "after" && n%3 == 0:
			send(protocol.AnswerDelta{Type: protocol.TypeAnswerDelta, RequestID: id, Text: "more"})
		}
	}
	for {
		typ, b, err := ws.Read(ctx)
		if err != nil {
			if websocket.CloseStatus(err) == websocket.StatusNormalClosure && f.running.Load() > 0 {
				f.closedBusy.Add(1)
			}
			return
		}
		if typ == websocket.MessageBinary {
			a, err := protocol.DecodeBinaryAudio(b)
			if err != nil {
				fail("", protocol.CodeOf(err))
				continue
			}
			id := a.Header.RequestID
			mu.Lock()
			rq, ok := reqs[id]
			if ok && rq.isFin && a.Header.Seq == 0 {
				rq.cancel(errCauseReplaced)
				delete(reqs, id)
				ok = false
			}
			if !ok && refused[id] {
				mu.Unlock()
				continue
			}
			if !ok && f.inFlight > 0 && len(reqs) >= f.inFlight {
				refused[id] = true
				mu.Unlock()
				fail(id, protocol.CodeOverloaded)
				continue
			}
			if !ok {
				if a.Header.Seq != 0 {
					mu.Unlock()
					fail(id, protocol.CodeBadMessage)
					continue
				}
				if supersede {
					for oid, o := range reqs {
						o.cancel(errCauseReplaced)
						delete(reqs, oid)
					}
				}
				rctx, cancel := context.WithCancelCause(ctx)
				rq = &fakeReq{final: make(chan int64, 1), cancel: cancel}
				reqs[id] = rq
				wg.Go(func() { run(id, rq, rctx) })
			}
			if a.Header.Final && !rq.isFin {
				rq.isFin = true
				rq.final <- a.Header.DeadlineAt
			}
			mu.Unlock()
			continue
		}
		msg, err := protocol.DecodeText(b)
		if err != nil {
			fail("", protocol.CodeOf(err))
			continue
		}
		switch m := msg.(type) {
		case *protocol.Ping:
			mu.Lock()
			late := held
			held = nil
			mu.Unlock()
			for _, res := range late {
				send(res)
			}
			send(protocol.Pong{Type: protocol.TypePong, ClientTime: m.ClientTime, ServerTime: protocol.Millis(time.Now())})
		case *protocol.Cancel:
			mu.Lock()
			rq, ok := reqs[m.RequestID]
			if ok {
				delete(reqs, m.RequestID)
			}
			mu.Unlock()
			if ok {
				rq.cancel(errCauseCancelled)
			} else {
				fail(m.RequestID, protocol.CodeBadMessage)
			}
		case *protocol.SessionUpdate:
			if m.Supersede != nil {
				mu.Lock()
				supersede = *m.Supersede
				mu.Unlock()
			}
		}
	}
}

func addrOf(srv *httptest.Server) string { return strings.TrimPrefix(srv.URL, "http://") }
