package llm

import (
	"bytes"
	"sync"
)

// lockedWriter lets the slog handler and the test read the log buffer safely.
type lockedWriter struct {
	mu  sync.Mutex
	buf *bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}
