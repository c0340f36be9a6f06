// Package cancel keeps a session's in-flight requests: a registry from
// requestId to the request's cancel function, and the typed causes a
// request can be cancelled with. Cancelling one request never touches
// another; closing the registry cancels them all.
package cancel

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Cause says why a request was cancelled. Causes are compared by identity:
// use the package's values with errors.Is.
type Cause struct{ name string }

func (c *Cause) Error() string { return c.name }

// Name is the cause's stable name, used in terminal messages, logs and
// metric labels.
func (c *Cause) Name() string { return c.name }

// The causes a request can end with before it completes.
var (
	// Cancelled: the client sent a cancel message for the request.
	Cancelled = &Cause{"cancelled"}
	// Replaced: a newer request replaced it (same requestId re-sent, or a
	// new request on a session with supersede on).
	Replaced = &Cause{"replaced"}
	// Interrupted: the caller started speaking again (server turn
	// detection with interrupt on) while the request was in flight.
	Interrupted = &Cause{"interrupted"}
	// ClientDisconnect: the connection closed.
	ClientDisconnect = &Cause{"client_disconnect"}
	// RequestDeadline: the request's deadline passed.
	RequestDeadline = &Cause{"request_deadline"}
	// Shutdown: the server stopped before the request could finish.
	Shutdown = &Cause{"shutdown"}
	// Failed: the server ended the request with an error of its own (bad
	// input, overload), which its terminal message reports. It stops the
	// request's work like a cancellation but is not counted as one.
	Failed = &Cause{"failed"}
)

// Causes lists the cancellation causes, for pre-creating metric label
// values. Failed is not among them: a failure is not a cancellation.
var Causes = []*Cause{Cancelled, Replaced, Interrupted, ClientDisconnect, RequestDeadline, Shutdown}

// Of returns why ctx was cancelled, or nil while it is live. A context
// that ended through its deadline reports RequestDeadline even when the
// deadline was set without a cause, so that a deadline is never reported
// as a plain cancellation.
func Of(ctx context.Context) *Cause {
	if ctx.Err() == nil {
		return nil
	}
	cause := context.Cause(ctx)
	if c, ok := errors.AsType[*Cause](cause); ok {
		return c
	}
	if errors.Is(cause, context.DeadlineExceeded) {
		return RequestDeadline
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return RequestDeadline
	}
	return Cancelled
}

// ErrClosed is returned by Register once the registry has been closed.
var ErrClosed = errors.New("cancel: registry closed")

// ErrExists is returned by Register when the id is already registered.
var ErrExists = errors.New("cancel: request id already registered")

// Registry maps request ids to their cancel functions and a value of the
// caller's (the session keeps its per-request state there). It is safe for
// concurrent use. The zero value is ready to use.
type Registry[V any] struct {
	mu     sync.Mutex
	closed bool
	m      map[string]*Handle[V] // guarded by mu
}

// Handle is one registration. Its Release removes it from the registry,
// but only if it is still the registration for its id, so a request that
// was replaced cannot remove its replacement.
type Handle[V any] struct {
	r      *Registry[V]
	ID     string
	Value  V
	cancel context.CancelCauseFunc
}

// Register derives a cancellable context for id from parent and records
// it. It fails with ErrExists if id is in flight and with ErrClosed after
// Close. init, when not nil, runs before the registration becomes visible
// to other goroutines (under the registry's lock: it must not call back
// into the registry), so that whoever cancels the request finds it whole.
func (r *Registry[V]) Register(parent context.Context, id string, v V, init func(context.Context, *Handle[V])) (context.Context, *Handle[V], error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, nil, ErrClosed
	}
	if _, ok := r.m[id]; ok {
		return nil, nil, ErrExists
	}
	ctx, cancel := context.WithCancelCause(parent)
	h := &Handle[V]{r: r, ID: id, Value: v, cancel: cancel}
	if init != nil {
		init(ctx, h)
	}
	if r.m == nil {
		r.m = make(map[string]*Handle[V])
	}
	r.m[id] = h
	return ctx, h, nil
}

// Get returns the registration for id.
func (r *Registry[V]) Get(id string) (*Handle[V], bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.m[id]
	return h, ok
}

// Len returns the number of registered requests.
func (r *Registry[V]) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}

// Cancel removes id and cancels its context with cause. It reports the
// removed registration, or false if id was not registered.
func (r *Registry[V]) Cancel(id string, cause *Cause) (*Handle[V], bool) {
	r.mu.Lock()
	h, ok := r.m[id]
	if ok {
		delete(r.m, id)
	}
	r.mu.Unlock()
	if ok {
		h.cancel(cause)
	}
	return h, ok
}

// CancelAll removes and cancels every registration with cause, leaving the
// registry open, and returns what it removed.
func (r *Registry[V]) CancelAll(cause *Cause) []*Handle[V] {
	r.mu.Lock()
	hs := make([]*Handle[V], 0, len(r.m))
	for _, h := range r.m {
		hs = append(hs, h)
	}
	clear(r.m)
	r.mu.Unlock()
	// Cancel outside the lock: cancellation runs AfterFunc callbacks,
	// which must be free to call back into the registry.
	for _, h := range hs {
		h.cancel(cause)
	}
	return hs
}

// Handles returns the current registrations, leaving them as they are:
// for a caller that ends some of them its own way and leaves the others
// (a request whose terminal is decided stays registered until it is sent).
func (r *Registry[V]) Handles() []*Handle[V] {
	r.mu.Lock()
	defer r.mu.Unlock()
	hs := make([]*Handle[V], 0, len(r.m))
	for _, h := range r.m {
		hs = append(hs, h)
	}
	return hs
}

// Close cancels every registration with cause and refuses new ones.
func (r *Registry[V]) Close(cause *Cause) []*Handle[V] {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	return r.CancelAll(cause)
}

// Seal refuses new registrations and returns the registered ones, left
// running: their owner decides, one by one, which to cancel.
func (r *Registry[V]) Seal() []*Handle[V] {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	hs := make([]*Handle[V], 0, len(r.m))
	for _, h := range r.m {
		hs = append(hs, h)
	}
	return hs
}

// Release removes h from its registry if it is still registered, and
// releases its context's resources. It is safe to call more than once.
func (h *Handle[V]) Release() {
	r := h.r
	r.mu.Lock()
	if r.m[h.ID] == h {
		delete(r.m, h.ID)
	}
	r.mu.Unlock()
	h.cancel(context.Canceled)
}

// Cancel cancels h's context with cause and removes it from the registry.
func (h *Handle[V]) Cancel(cause *Cause) {
	r := h.r
	r.mu.Lock()
	if r.m[h.ID] == h {
		delete(r.m, h.ID)
	}
	r.mu.Unlock()
	h.cancel(cause)
}
