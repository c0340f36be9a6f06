//go:build !cgo || noflite

package flite

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/voiced/voiced/internal/stages/tts/speech"
)

// ErrNoCgo says why the engine is unavailable in this build.
var ErrNoCgo = errors.New("the embedded Flite engine is not in this build (built with CGO_ENABLED=0 or the noflite tag); " +
	"rebuild with cgo after installing " + Packages + ", or select the remote speech engine")

type voice struct{}

func register() error { return fmt.Errorf("%w: %w", ErrNoCgo, speech.ErrUnavailable) }

func voiceByName(string) (voice, error) { return voice{}, register() }

func synth(context.Context, voice, string, []int, *speech.Filters, time.Time, *speech.Result, func([]int16)) error {
	return register()
}
