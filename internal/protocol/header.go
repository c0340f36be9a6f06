package protocol

// The binary audio header is the one JSON document parsed for every audio
// frame, and encoding/json's reflection was the largest share of the
// server's CPU per frame. decodeHeader parses the common form by hand: an
// object of the header's own keys, spelt exactly, with plain ASCII strings,
// integers and booleans. Anything else (escapes, other spellings, repeated
// keys, nulls, fractions, exponents, non-ASCII) goes to the strict
// encoding/json decoder, which decides what is valid and words the error,
// so the two can never disagree on an input the fast path accepts
// (FuzzHeaderFastPath checks that).

// decodeHeader parses a binary frame's JSON header into h.
func decodeHeader(b []byte, h *AudioHeader) error {
	if fastHeader(b, h) {
		return nil
	}
	// encoding/json's target escapes to the heap: a copy of its own, so
	// that h, and the frame's Audio around it, can stay on the caller's
	// stack on the fast path, once per frame.
	var slow AudioHeader
	err := decodeStrict(b, &slow)
	*h = slow
	return err
}

// Bits of the keys seen, so that a repeated key leaves the fast path:
// encoding/json decides it (it keeps the last value), and the two agree.
const (
	seenType = 1 << iota
	seenRequestID
	seenDeadlineAt
	seenSeq
	seenFinal
	seenSampleRate
)

// fastHeader parses b into h if b is in the common form, and reports
// whether it was; h may be partly written when it was not.
func fastHeader(b []byte, h *AudioHeader) bool {
	p := scanner{b: b}
	if !p.skip('{') {
		return false
	}
	seen := 0
	if p.skip('}') {
		return p.end()
	}
	for {
		key, ok := p.str()
		if !ok || !p.skip(':') {
			return false
		}
		bit, ok := p.value(key, h)
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		if p.skip(',') {
			continue
		}
		return p.skip('}') && p.end()
	}
}

// scanner reads JSON tokens of the common form from b.
type scanner struct {
	b []byte
	i int
}

func (p *scanner) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// skip consumes c, after white space, if it is next.
func (p *scanner) skip(c byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// end reports whether only white space is left.
func (p *scanner) end() bool {
	p.ws()
	return p.i == len(p.b)
}

// str reads a string of printable ASCII without escapes.
func (p *scanner) str() ([]byte, bool) {
	if !p.skip('"') {
		return nil, false
	}
	start := p.i
	for ; p.i < len(p.b); p.i++ {
		switch c := p.b[p.i]; {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			return s, true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, false
		}
	}
	return nil, false
}

// int reads an integer: an optional minus and digits without a leading
// zero, with no fraction or exponent, that fits in 63 bits.
func (p *scanner) int() (int64, bool) {
	p.ws()
	neg := p.i < len(p.b) && p.b[p.i] == '-'
	if neg {
		p.i++
	}
	start := p.i
	var n int64
	for ; p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9'; p.i++ {
		if n > (1<<63-1-9)/10 {
			return 0, false // may overflow: let encoding/json judge
		}
		n = n*10 + int64(p.b[p.i]-'0')
	}
	digits := p.i - start
	if digits == 0 || (digits > 1 && p.b[start] == '0') {
		return 0, false
	}
	if p.i < len(p.b) {
		switch p.b[p.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	if neg {
		n = -n
	}
	return n, true
}

// literal consumes word if it is next.
func (p *scanner) literal(word string) bool {
	p.ws()
	if len(p.b)-p.i >= len(word) && string(p.b[p.i:p.i+len(word)]) == word {
		p.i += len(word)
		return true
	}
	return false
}

// value reads the value of key into h and returns key's bit.
func (p *scanner) value(key []byte, h *AudioHeader) (int, bool) {
	switch string(key) {
	case "type":
		s, ok := p.str()
		if !ok || string(s) != TypeAudio {
			return 0, false // a wrong type is rare; encoding/json reads it
		}
		h.Type = TypeAudio
		return seenType, true
	case "requestId":
		s, ok := p.str()
		h.RequestID = string(s)
		return seenRequestID, ok
	case "deadlineAt":
		n, ok := p.int()
		h.DeadlineAt = n
		return seenDeadlineAt, ok
	case "seq":
		n, ok := p.int()
		h.Seq = n
		return seenSeq, ok
	case "final":
		switch {
		case p.literal("true"):
			h.Final = true
		case p.literal("false"):
			h.Final = false
		default:
			return 0, false
		}
		return seenFinal, true
	case "sampleRate":
		n, ok := p.int()
		if n != int64(int(n)) {
			return 0, false
		}
		h.SampleRate = int(n)
		return seenSampleRate, ok
	}
	return 0, false
}

// fastPing parses b as a ping if it is in the common form: an object of
// the keys "type" ("ping") and "clientTime" (an integer), each at most
// once, spelt exactly. A client's keepalive is the one message an idle
// session reads all through its life, and encoding/json's decoding of it
// (DecodeText's two passes) allocated about 1.5 KiB; anything else goes
// to encoding/json as before (FuzzPingFastPath checks the two agree).
func fastPing(b []byte) (Ping, bool) {
	p := scanner{b: b}
	var ping Ping
	if !p.skip('{') {
		return Ping{}, false
	}
	seen := 0
	for {
		key, ok := p.str()
		if !ok || !p.skip(':') {
			return Ping{}, false
		}
		bit := 0
		switch string(key) {
		case "type":
			s, ok := p.str()
			if !ok || string(s) != TypePing {
				return Ping{}, false
			}
			bit = seenType
		case "clientTime":
			n, ok := p.int()
			if !ok {
				return Ping{}, false
			}
			ping.ClientTime, bit = n, seenDeadlineAt
		}
		if bit == 0 || seen&bit != 0 {
			return Ping{}, false
		}
		seen |= bit
		if p.skip(',') {
			continue
		}
		if !p.skip('}') || !p.end() || seen&seenType == 0 {
			return Ping{}, false
		}
		ping.Type = TypePing
		return ping, true
	}
}
