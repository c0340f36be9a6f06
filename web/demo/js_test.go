package demo_test

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestJSUnits runs the unit tests of the page's pure modules (resampler,
// VAD, frame encoding, clock, backoff, resume, timeline layout) under Node's
// built-in test runner. It skips when node is not installed.
func TestJSUnits(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not installed (apt-get install nodejs): skipping the page's JavaScript unit tests")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, node, "--test", "jstest/").CombinedOutput()
	require.NoError(t, err, "node --test jstest/:\n%s", out)
}
