// Package llmtest provides fake LLM provider servers for tests: local
// httptest servers that speak each provider's wire format (OpenAI Chat
// Completions, Anthropic Messages, Gemini streamGenerateContent?alt=sse)
// and replay a script of replies, including faults: error statuses with
// wait headers or bodies, slow first tokens, stalls, mid-stream errors,
// malformed events and dropped connections. Every request is recorded
// (headers, path, decoded body, arrival time) so tests can check what the
// adapter sent and how many attempts the chain made, in which order.
package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// Reply answers one request. It may block, but must return once the
// request's context or quit is done.
type Reply func(w http.ResponseWriter, r *http.Request, quit <-chan struct{})

// Recorded is one request the server received.
type Recorded struct {
	Server string
	// RemoteAddr is the client's address: the same for requests that
	// reused one connection.
	RemoteAddr string
	Path       string
	Query      string
	Header     http.Header
	Body       map[string]any
	At         time.Time
	// Gone is closed when the server saw the client go away or the reply
	// returned; GoneAt is then the time it happened.
	Gone   chan struct{}
	GoneAt time.Time
}

// Journal is an ordered log of requests across several servers, so a
// test can assert the order of attempts of a chain.
type Journal struct {
	mu   sync.Mutex
	seen []string
}

// Names returns the server names of the requests so far, in order.
func (j *Journal) Names() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.seen...)
}

func (j *Journal) add(name string) {
	j.mu.Lock()
	j.seen = append(j.seen, name)
	j.mu.Unlock()
}

// Server is a scripted fake provider.
type Server struct {
	*httptest.Server
	name    string
	journal *Journal
	quit    chan struct{}

	mu       sync.Mutex
	script   []Reply
	requests []*Recorded
}

// NewServer starts a server named name (the name goes into the journal,
// which may be nil) that answers the n-th request with script[n], and
// every request after the script's end with its last reply.
func NewServer(name string, journal *Journal, script ...Reply) *Server {
	s := &Server{name: name, journal: journal, quit: make(chan struct{}), script: script}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Close stops blocked replies, then the server.
func (s *Server) Close() {
	close(s.quit)
	s.Server.Close()
}

// Requests returns the requests so far.
func (s *Server) Requests() []*Recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Recorded(nil), s.requests...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	rec := &Recorded{Server: s.name, RemoteAddr: r.RemoteAddr, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), At: time.Now(), Gone: make(chan struct{})}
	_ = json.Unmarshal(raw, &rec.Body)
	s.mu.Lock()
	n := len(s.requests)
	s.requests = append(s.requests, rec)
	var reply Reply
	if len(s.script) > 0 {
		reply = s.script[min(n, len(s.script)-1)]
	}
	s.mu.Unlock()
	if s.journal != nil {
		s.journal.add(s.name)
	}
	defer func() {
		s.mu.Lock()
		rec.GoneAt = time.Now()
		s.mu.Unlock()
		close(rec.Gone)
	}()
	if reply == nil {
		http.Error(w, "no script", http.StatusInternalServerError)
		return
	}
	reply(w, r, s.quit)
}

// WhenGone returns when the client went away (or the reply ended).
func (rec *Recorded) WhenGone() time.Time {
	<-rec.Gone
	return rec.GoneAt
}

// Status replies with an HTTP error status, headers and a body.
func Status(code int, header map[string]string, body string) Reply {
	return func(w http.ResponseWriter, r *http.Request, _ <-chan struct{}) {
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

// Drop closes the connection without any response.
func Drop() Reply {
	return func(w http.ResponseWriter, r *http.Request, _ <-chan struct{}) {
		panic(http.ErrAbortHandler)
	}
}

// StreamOpts shape a streamed reply.
type StreamOpts struct {
	Header     map[string]string
	FirstDelay time.Duration // wait before the first event (after the headers)
	Gap        time.Duration // wait between events
	// After the first CutAfter events (when > 0), do Cut.
	CutAfter int
	Cut      Cut
}

// Cut is how a stream ends early.
type Cut int

const (
	CutNone  Cut = iota
	CutStall     // stop sending and wait until the client goes away
	CutDrop      // abort the connection without the end of the stream
)

// Stream replies 200 text/event-stream with the raw events (each already
// framed, e.g. "data: {...}\n\n"), flushing after each.
func Stream(events []string, o StreamOpts) Reply {
	return func(w http.ResponseWriter, r *http.Request, quit <-chan struct{}) {
		for k, v := range o.Header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		fl := w.(http.Flusher)
		fl.Flush()
		if !wait(r, quit, o.FirstDelay) {
			return
		}
		for i, ev := range events {
			if o.CutAfter > 0 && i == o.CutAfter {
				switch o.Cut {
				case CutStall:
					wait(r, quit, time.Hour)
					return
				case CutDrop:
					panic(http.ErrAbortHandler)
				}
			}
			if i > 0 && !wait(r, quit, o.Gap) {
				return
			}
			if _, err := io.WriteString(w, ev); err != nil {
				return
			}
			fl.Flush()
		}
	}
}

// wait waits d, or until the client or the server goes away; it reports
// whether the full wait elapsed.
func wait(r *http.Request, quit <-chan struct{}, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	case <-quit:
		return false
	}
}

// SSE frames data as one event, optionally named, with the given line
// ending ("\n" or "\r\n").
func SSE(name, data, eol string) string {
	if name != "" {
		return fmt.Sprintf("event: %s%sdata: %s%s%s", name, eol, data, eol, eol)
	}
	return fmt.Sprintf("data: %s%s%s", data, eol, eol)
}

// JSON marshals v, panicking on error (test data only).
func JSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
