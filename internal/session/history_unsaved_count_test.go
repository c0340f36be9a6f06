package session

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
)

// failingStore is a conversation store whose saves all fail; onSave, if
// set, runs at the first save, before it fails.
type failingStore struct {
	*MemoryConversations
	onSave func()
}

func (f *failingStore) Save(ctx context.Context, id string, c Conversation) error {
	if f.onSave != nil {
		f.onSave()
		f.onSave = nil
	}
	return errors.New("store away")
}

// TestHistoryNotDurableCountsTurnsOnce: voiced_history_not_durable_total
// counts each answered turn whose history could not be made durable,
// once. It counted every failed save instead: a playback cut's save (no
// turn of its own), and both saves of one turn whose session learnt,
// during its own save, that the client had resumed on another session of
// this process (the hand-over saves the turn again there).
func TestHistoryNotDurableCountsTurnsOnce(t *testing.T) {
	turn := pipeline.Turn{User: "where is my order", Assistant: "It ships today."}
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, srv *Server, store *failingStore, s *Session)
		want float64
	}{
		{
			name: "a turn's save fails",
			run: func(t *testing.T, srv *Server, store *failingStore, s *Session) {
				s.remember("r1", turn, nil)(t.Context())
			},
			want: 1,
		},
		{
			name: "resumed here during the save",
			run: func(t *testing.T, srv *Server, store *failingStore, s *Session) {
				live := newSession(srv, "live", srv.log)
				live.conv = s.conv
				store.onSave = func() {
					srv.mu.Lock()
					srv.live[s.conv] = live
					srv.mu.Unlock()
				}
				s.remember("r1", turn, nil)(t.Context())
				require.Len(t, live.history(), 1, "the turn was handed over")
			},
			want: 1,
		},
		{
			name: "a playback cut's save fails",
			run: func(t *testing.T, srv *Server, store *failingStore, s *Session) {
				s.saveCut()
				s.wg.Wait()
			},
			want: 0,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &failingStore{MemoryConversations: NewMemoryConversations(time.Minute)}
			srv := NewServer(Config{Conversations: store}, drainRunner{}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
			t.Cleanup(func() { require.NoError(t, srv.Close()) })
			s := newSession(srv, "old", srv.log)
			s.conv = "conv"
			tc.run(t, srv, store, s)
			require.Equal(t, tc.want, testutil.ToFloat64(srv.metrics.historyUnsaved))
		})
	}
}
