package session

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A negative duration where none has a meaning is the default, not a
// deadline in the past that fails every write or refuses every frame.
func TestNegativeDurationsAreDefaults(t *testing.T) {
	c := Config{WriteTimeout: -time.Second, MaxAudioPerRequest: -time.Second}.WithDefaults()
	require.Equal(t, 5*time.Second, c.WriteTimeout)
	require.Equal(t, 30*time.Second, c.MaxAudioPerRequest)
}
