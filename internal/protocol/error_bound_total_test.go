package protocol_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/protocol"
)

// TestErrorMessageBoundIncludesMark: protocol.md says "A message is at
// most 512 bytes": the "…" that marks a cut message (3 bytes) counts, and
// a message of exactly MaxErrorMessage bytes is left whole.
func TestErrorMessageBoundIncludesMark(t *testing.T) {
	long := protocol.Errorf(protocol.CodeBadMessage, "%s", strings.Repeat("f", 10_000)).Message
	require.LessOrEqual(t, len(long), protocol.MaxErrorMessage)
	require.True(t, strings.HasSuffix(long, "…"))
	exact := strings.Repeat("g", protocol.MaxErrorMessage)
	require.Equal(t, exact, protocol.Errorf(protocol.CodeBadMessage, "%s", exact).Message)
}
