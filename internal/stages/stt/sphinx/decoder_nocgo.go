//go:build !cgo || nosphinx

package sphinx

import (
	"errors"
	"fmt"
	"time"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/stages/stt/lm"
)

// ErrNoCgo says why the engine is unavailable in this build.
var ErrNoCgo = errors.New("the embedded PocketSphinx engine is not in this build (built with CGO_ENABLED=0 or the nosphinx tag); " +
	"rebuild with cgo after installing " + Packages + ", or select the remote STT engine")

type decoder struct{ inUtt, broken bool }

type lmSpec struct {
	general, domain string
	weight          float64
}

func newDecoder(Config, lmSpec, []lm.Pronunciation) (*decoder, error) {
	return nil, fmt.Errorf("sphinx: %w: %w", ErrNoCgo, pipeline.ErrUnavailable)
}

func (d *decoder) start(string, channel, bool) error                { return ErrNoCgo }
func (d *decoder) prob() float64                                    { return 0 }
func (d *decoder) process([]int16) error                            { return ErrNoCgo }
func (d *decoder) estimateCMN([]int16) int                          { return 0 }
func (d *decoder) hyp() string                                      { return "" }
func (d *decoder) end() (string, error)                             { return "", ErrNoCgo }
func (d *decoder) reset() error                                     { return nil }
func (d *decoder) free()                                            {}
func (d *decoder) nbest(int) ([]pipeline.Hypothesis, time.Duration) { return nil, 0 }

const cgoAvailable = false
