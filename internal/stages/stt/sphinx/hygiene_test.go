//go:build cgo && !nosphinx

package sphinx

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// rssBytes is the process's resident set size, after returning freed Go
// memory to the OS so that only real growth shows.
func rssBytes(t *testing.T) int64 {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	trimCHeap()
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skip("no /proc/self/statm")
	}
	pages, err := strconv.ParseInt(strings.Fields(string(data))[1], 10, 64)
	require.NoError(t, err)
	return pages * int64(os.Getpagesize())
}

// TestCgoHygiene decodes several hundred utterances, finished, abandoned
// half-way and cancelled, on a small pool and checks that resident memory
// does not grow: every C allocation of an utterance is freed or reused.
// It then builds and frees whole engines and checks the same for decoders.
//
// glibc's malloc gives each thread that allocates its own arena, and Go runs
// cgo calls on whichever thread is free, so memory freed by one decoder may
// sit in an arena another thread never reuses: RSS then grows by a few MB
// per engine built and freed without anything leaking (measured: flat with
// one arena). The test therefore runs itself in a child process with
// MALLOC_ARENA_MAX=1, where any growth is a real leak.
func TestCgoHygiene(t *testing.T) {
	skipWithoutModels(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	if os.Getenv("SPHINX_HYGIENE_CHILD") == "" {
		args := []string{"-test.run=^TestCgoHygiene$", "-test.v", "-test.count=1"}
		if testing.Short() {
			args = append(args, "-test.short")
		}
		cmd := exec.CommandContext(ctx, os.Args[0], args...)
		cmd.Env = append(os.Environ(), "SPHINX_HYGIENE_CHILD=1", "MALLOC_ARENA_MAX=1")
		out, err := cmd.CombinedOutput()
		t.Logf("child:\n%s", out)
		require.NoError(t, err)
		return
	}
	// NBest: finished utterances also run the N-best search, whose A*
	// paths must be freed too.
	e, err := New(ctx, Config{Decoders: 2, CacheDir: t.TempDir(), NBest: 5}, testCorpus(), quiet, nil)
	require.NoError(t, err)
	defer e.Close()
	var clips [][]int16
	for _, s := range []string{"where is my order", "how much is shipping", "i forgot my password"} {
		pcm, rate := synth(t, "flite-slt", s)
		require.Equal(t, modelRate, rate)
		clips = append(clips, pcm)
	}
	utterance := func(i int) {
		pcm := clips[i%len(clips)]
		uctx, ucancel := context.WithCancel(ctx)
		defer ucancel()
		r, err := e.Start(uctx, modelRate)
		require.NoError(t, err)
		defer r.Close()
		switch i % 4 {
		case 0, 1: // finished normally
			_, err = r.Write(uctx, pcm)
			require.NoError(t, err)
			text, err := r.Finish(uctx)
			require.NoError(t, err)
			require.NotEmpty(t, text)
		case 2: // abandoned: closed without Finish
			_, err = r.Write(uctx, pcm[:len(pcm)/2])
			require.NoError(t, err)
		case 3: // cancelled mid-stream
			_, err = r.Write(uctx, pcm[:len(pcm)/2])
			require.NoError(t, err)
			ucancel()
			_, err = r.Write(uctx, pcm[len(pcm)/2:])
			require.ErrorIs(t, err, context.Canceled)
		}
	}
	n := 240
	if testing.Short() {
		n = 80
	}
	// Warm up: let the decoders' buffers and Go's heap reach their
	// working size.
	for i := range 40 {
		utterance(i)
	}
	before := rssBytes(t)
	for i := range n {
		utterance(i)
	}
	after := rssBytes(t)
	t.Logf("RSS after warm-up %d MB, after %d more utterances %d MB", before>>20, n, after>>20)
	// A leak of even one small buffer per utterance would show as
	// several MB; allocator noise stays well under this.
	require.Less(t, after-before, int64(12<<20), "RSS grew by %d KB over %d utterances", (after-before)>>10, n)

	// Whole engines: built and freed, they give their memory back.
	cycle := func() {
		e, err := New(ctx, Config{Decoders: 2, LM: LMGeneral}, nil, quiet, nil)
		require.NoError(t, err)
		r, err := e.Start(ctx, modelRate)
		require.NoError(t, err)
		_, err = r.Write(ctx, clips[0])
		require.NoError(t, err)
		require.NoError(t, r.Close())
		require.NoError(t, e.Close())
	}
	cycle()
	before = rssBytes(t)
	for range 3 {
		cycle()
	}
	after = rssBytes(t)
	t.Logf("RSS around 3 engine build/free cycles: %d MB -> %d MB", before>>20, after>>20)
	// Two decoders hold about 200 MB: a leaked decoder would show.
	require.Less(t, after-before, int64(40<<20), "engines not freed")
}
