// Package ttstest is a fake OpenAI-compatible speech server for tests. It
// speaks the exact wire format of POST /v1/audio/speech with
// "response_format": "pcm": raw 24 kHz 16-bit little-endian mono PCM in
// flushed HTTP chunks of uneven sizes, one of them odd-length so a sample
// straddles two chunks; errors are JSON {"error":{"message","type","code"}}
// with their status, like the chat API's. Faults are set per server.
package ttstest

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
)

// Rate is the rate of the audio the server sends.
const Rate = 24000

// PerChar is how many samples of audio the server sends per character
// of input (about 60 ms: a little slower than speech).
const PerChar = 1440

// Fault is a failure the server plays.
type Fault int

// Faults.
const (
	// OK: a complete answer.
	OK Fault = iota
	// Hang: accept the request and send nothing until the client gives up.
	Hang
	// RateLimited: 429 rate_limit_exceeded with Retry-After: 2.
	RateLimited
	// ServerError: 500 server_error.
	ServerError
	// Unauthorized: 401 invalid_api_key.
	Unauthorized
	// BadRequest: 400 invalid_request_error.
	BadRequest
	// Cut: send part of the audio, then drop the connection without the
	// end of the chunked body.
	Cut
	// Stall: send part of the audio, then nothing until the client gives up.
	Stall
)

// Request is what the server received.
type Request struct {
	Model, Voice, Input, ResponseFormat string
	Authorization                       string
}

// Server is a fake speech server.
type Server struct {
	*httptest.Server
	// Key, when set, is the bearer token the server requires (401 else).
	Key string

	mu       sync.Mutex
	fault    Fault
	requests []Request
}

// New starts a server on loopback; Close it when done. Its base URL for
// the remote engine is URL+"/v1".
func New() *Server {
	s := &Server{}
	s.Server = httptest.NewServer(http.HandlerFunc(s.handle))
	return s
}

// SetFault sets the failure the next requests get.
func (s *Server) SetFault(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault = f
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Audio is the PCM the server sends for input: PerChar samples of a
// 200 Hz tone per character.
func Audio(input string) []int16 {
	pcm := make([]int16, PerChar*len(input))
	for i := range pcm {
		pcm[i] = int16(6000 * math.Sin(2*math.Pi*200*float64(i)/Rate))
	}
	return pcm
}

// chunkSizes are the body's chunk sizes in bytes, repeated: uneven, and
// the second one odd, so samples straddle chunks.
var chunkSizes = []int{4800, 1201, 3, 960, 9600}

func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	var body struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    string  `json:"code"`
		} `json:"error"`
	}
	body.Error.Message, body.Error.Type, body.Error.Code = msg, typ, code
	_ = json.NewEncoder(w).Encode(body)
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/audio/speech" {
		writeError(w, http.StatusNotFound, "invalid_request_error", "not_found", "Unknown request URL: "+r.Method+" "+r.URL.Path)
		return
	}
	var req struct {
		Model          string `json:"model"`
		Voice          string `json:"voice"`
		Input          string `json:"input"`
		ResponseFormat string `json:"response_format"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "We could not parse the JSON body of your request.")
		return
	}
	s.mu.Lock()
	fault := s.fault
	s.requests = append(s.requests, Request{Model: req.Model, Voice: req.Voice, Input: req.Input,
		ResponseFormat: req.ResponseFormat, Authorization: r.Header.Get("Authorization")})
	s.mu.Unlock()

	switch {
	case s.Key != "" && r.Header.Get("Authorization") != "Bearer "+s.Key, fault == Unauthorized:
		writeError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "Incorrect API key provided.")
		return
	case req.Model == "" || req.Voice == "" || req.Input == "":
		writeError(w, http.StatusBadRequest, "invalid_request_error", "missing_required_parameter", "model, voice and input are required")
		return
	case req.ResponseFormat != "pcm":
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", fmt.Sprintf("this fake speaks only pcm, not %q", req.ResponseFormat))
		return
	}
	switch fault {
	case Hang:
		<-r.Context().Done()
		return
	case RateLimited:
		w.Header().Set("Retry-After", "2")
		writeError(w, http.StatusTooManyRequests, "requests", "rate_limit_exceeded", "Rate limit reached for requests")
		return
	case ServerError:
		writeError(w, http.StatusInternalServerError, "server_error", "", "The server had an error while processing your request.")
		return
	case BadRequest:
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "Invalid value for 'input'.")
		return
	}
	pcm := Audio(req.Input)
	body := make([]byte, 2*len(pcm))
	for i, v := range pcm {
		binary.LittleEndian.PutUint16(body[2*i:], uint16(v))
	}
	w.Header().Set("Content-Type", "audio/pcm")
	w.WriteHeader(http.StatusOK)
	flusher := w.(http.Flusher)
	flusher.Flush()
	for i := 0; len(body) > 0; i++ {
		if i == 3 && (fault == Cut || fault == Stall) {
			if fault == Stall {
				<-r.Context().Done()
				return
			}
			// Without the chunked body's final chunk: the client sees an
			// unexpected EOF.
			panic(http.ErrAbortHandler)
		}
		n := min(chunkSizes[i%len(chunkSizes)], len(body))
		if _, err := w.Write(body[:n]); err != nil {
			return
		}
		flusher.Flush()
		body = body[n:]
	}
}
