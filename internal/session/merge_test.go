package session

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
)

func TestMergeTurns(t *testing.T) {
	turn := func(n string) pipeline.Turn { return pipeline.Turn{User: "q" + n, Assistant: "a" + n} }
	ex := func(ns ...string) []exchange {
		var out []exchange
		for _, n := range ns {
			out = append(out, exchange{Turn: turn(n)})
		}
		return out
	}
	hist := func(ns ...string) []pipeline.Turn {
		var out []pipeline.Turn
		for _, n := range ns {
			out = append(out, turn(n))
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		cur   []exchange
		hist  []pipeline.Turn
		want  []exchange
		added int
	}{
		{"nothing new", ex("1", "2"), hist("1", "2"), ex("1", "2"), 0},
		{"the store is behind", ex("1", "2", "3"), hist("1", "2"), ex("1", "2", "3"), 0},
		{"a turn saved after the load", ex("1"), hist("1", "2"), ex("1", "2"), 1},
		// The session got a turn of its own (or a hand-off) since: the
		// store's newer turns are older than it.
		{"before what the session gained since", ex("1", "3"), hist("1", "2"), ex("1", "2", "3"), 1},
		{"the load found nothing", nil, hist("1", "2"), ex("1", "2"), 2},
		{"no turn in common", ex("9"), hist("1", "2"), ex("1", "2", "9"), 2},
		{"the store's copy was trimmed", ex("1", "2", "3", "4"), hist("2", "3", "4", "5"), ex("2", "3", "4", "5"), 1},
		{"only the last maxTurns are kept", ex("1", "2", "3", "4"), hist("3", "4", "5", "6"), ex("3", "4", "5", "6"), 2},
		{"empty store copy", ex("1"), nil, ex("1"), 0},
		// A greeting asked twice, same question, same answer ("g"): the
		// copies are placed where they end alike, not at the first
		// greeting.
		{"after a repeated exchange", ex("g", "1", "g"), hist("g", "1", "g", "2"), ex("g", "1", "g", "2"), 1},
		{"the repeat is the store's new turn", ex("g", "1"), hist("g", "1", "g"), ex("g", "1", "g"), 1},
		{"a repeat on both sides of the session's", ex("g", "g", "1"), hist("g", "g", "2"), ex("g", "g", "2", "1"), 1},
		{"the session gained the repeat", ex("g", "1", "g"), hist("g", "1", "2"), ex("g", "1", "2", "g"), 1},
		// A hand-off the session holds, which the store holds after a
		// turn saved before it.
		{"a hand-off after a turn the session missed", ex("1", "3"), hist("1", "2", "3"), ex("1", "2", "3"), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, added := mergeTurns(tc.cur, tc.hist)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.added, added, "turns taken from the store's copy")
		})
	}
}
