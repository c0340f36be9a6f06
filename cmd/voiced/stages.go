package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/stages/sim"
)

// engineFlags configures the real engines.
type engineFlags struct{}

func (e *engineFlags) register(fs *flag.FlagSet)          {}
func (e *engineFlags) fromEnv(getenv func(string) string) {}

// buildStages builds the pipeline's engines, and a function that releases
// them.
func buildStages(ctx context.Context, cfg *config, log *slog.Logger, reg prometheus.Registerer) (pipeline.Stages, func(), error) {
	if cfg.stages == "sim" {
		log.Warn("SIMULATION MODE: every stage is simulated with scripted latencies; answers are fake. For load tests only.")
		s := sim.New(cfg.sim)
		return pipeline.Stages{STT: s.STT, Intent: s.Intent, Retrieval: s.Retrieval, LLM: s.LLM}, func() {}, nil
	}
	return pipeline.Stages{}, nil, errors.New("no embedded STT engine is available in this build yet; run with -stages=sim")
}
