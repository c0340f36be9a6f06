// Command voiceload is voiced's load generator. It opens many protocol v1
// sessions against a voiced server, streams utterances as 20 ms audio
// frames in real time under per-request deadlines, mixes in cancels,
// replacements, barge-ins and disconnects, and reports latencies,
// deadline slack, terminal codes, degradations and the server's CPU and
// memory. It exits with status 1 when the server broke a protocol
// invariant (a request with no terminal message or more than one, a
// terminal message after the deadline) or when more requests than
// -max-error-share allows ended with error codes the run did not plan
// for, 2 on a usage or start-up error.
//
// It only targets loopback addresses unless the target is listed with
// -allow-addr. The bearer token for a server that needs one is read from
// VOICELOAD_TOKEN, never from a flag, so it stays out of shell history
// and process lists.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"sync"
	"syscall"
	"time"

	"github.com/lmittmann/tint"

	"github.com/voiced/voiced/internal/loadgen"
)

func main() {
	if os.Getenv("GOGC") == "" {
		// A run keeps a record of every request for its report, and at
		// thousands of sessions the collector's cycles (a quarter of the
		// CPUs for 100-200 ms each, on a machine the servers share) were
		// followed by bursts of terminals read late. Collecting a quarter
		// as often costs memory, which a load generator has to spare.
		debug.SetGCPercent(gcPercent)
	}
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// gcPercent is voiceload's GOGC unless the environment sets one.
const gcPercent = 400

// run is the command with its arguments and outputs; ctx bounds the
// load run, as the first interrupt does.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	if o.saveWAV != "" {
		return saveUtterance(o.saveWAV, o.cfg.Synthetic, stderr)
	}
	o.cfg.Token = os.Getenv("VOICELOAD_TOKEN")
	o.cfg.Logger = newLogger(stderr, o.verbose)
	if !o.quiet {
		o.cfg.Progress = stderr
	}
	ctx, stop := interruptible(ctx, stderr)
	defer stop()
	if o.cpuProf != "" {
		stopProfile, err := startCPUProfile(o.cpuProf)
		if err != nil {
			fmt.Fprintf(stderr, "voiceload: %v\n", err)
			return 2
		}
		defer stopProfile()
	}
	rep, err := loadgen.Run(ctx, o.cfg)
	if err != nil {
		fmt.Fprintf(stderr, "voiceload: %v\n", err)
		return 2
	}
	return writeReport(rep, o.jsonPath, stdout, stderr)
}

// options is voiceload's command line: the run's configuration and what
// the command does around the run.
type options struct {
	cfg      loadgen.Config
	jsonPath string
	quiet    bool
	verbose  bool
	saveWAV  string
	cpuProf  string
}

// parseFlags parses the command line. Its errors are already reported on
// stderr (by the flag package, or here), so that run only has an exit
// status to choose; -h is flag.ErrHelp.
func parseFlags(args []string, stderr io.Writer) (*options, error) {
	var o options
	fs := flag.NewFlagSet("voiceload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o.cfg.RegisterFlags(fs)
	fs.StringVar(&o.jsonPath, "json", "", "also write the report as JSON to this file (- for stdout, the table then going to stderr)")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress line")
	fs.BoolVar(&o.verbose, "v", false, "log session failures")
	fs.StringVar(&o.saveWAV, "save-utterance", "", "write the synthetic utterance to this WAV file and exit")
	fs.StringVar(&o.cpuProf, "cpuprofile", "", "write a CPU profile of the load generator itself to this file (is the client the bottleneck?)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: voiceload [flags]\n\n"+
			"Load-tests a voiced server over protocol v1 and checks its invariants.\n"+
			"Exit status: 0 clean, 1 an invariant was violated, 2 usage or start-up error.\n"+
			"Targets must be loopback unless listed with -allow-addr; a bearer token is read from VOICELOAD_TOKEN.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		err := fmt.Errorf("unexpected arguments %q", fs.Args())
		fmt.Fprintf(stderr, "voiceload: %v\n", err)
		return nil, err
	}
	return &o, nil
}

// saveUtterance is -save-utterance: it writes the synthetic utterance of
// length d to path instead of a run, and returns the exit status.
func saveUtterance(path string, d time.Duration, stderr io.Writer) int {
	if d <= 0 {
		fmt.Fprintf(stderr, "voiceload: -utterance %v: want a positive length\n", d)
		return 2
	}
	if err := writeSynthetic(path, d); err != nil {
		fmt.Fprintf(stderr, "voiceload: %v\n", err)
		return 2
	}
	return 0
}

// newLogger logs the run's errors, or with verbose every session's
// failure too, on stderr among the progress lines.
func newLogger(stderr io.Writer, verbose bool) *slog.Logger {
	level := slog.LevelError
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(tint.NewTextHandler(stderr, &tint.Options{Level: level, TimeFormat: time.TimeOnly}))
}

// interruptible returns ctx ended by the first SIGINT or SIGTERM, so that
// an interrupted run still reports what it measured; a second signal
// exits at once, with status 130. stop ends the watch and must be called
// before run returns.
func interruptible(ctx context.Context, stderr io.Writer) (_ context.Context, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-sigs:
		case <-done:
			return
		}
		fmt.Fprintln(stderr, "voiceload: interrupted; waiting for requests in flight (again to quit now)")
		cancel()
		select {
		case <-sigs:
			os.Exit(130)
		case <-done:
		}
	})
	return ctx, func() {
		close(done)
		wg.Wait()
		signal.Stop(sigs)
		cancel()
	}
}

// writeReport writes the report's table, and with jsonPath its JSON, and
// returns the exit status: 1 when the run found the server at fault.
func writeReport(rep loadgen.Report, jsonPath string, stdout, stderr io.Writer) int {
	table := stdout
	if jsonPath == "-" {
		table = stderr // stdout carries the JSON alone, for a pipe
	}
	if err := rep.WriteTable(table); err != nil {
		fmt.Fprintf(stderr, "voiceload: %v\n", err)
		return 2
	}
	if jsonPath != "" {
		if err := writeJSON(jsonPath, stdout, rep); err != nil {
			fmt.Fprintf(stderr, "voiceload: %v\n", err)
			return 2
		}
	}
	if !rep.OK() {
		return 1
	}
	return 0
}

// startCPUProfile profiles this process into path until the returned
// function is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

func writeJSON(path string, stdout io.Writer, rep loadgen.Report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = stdout.Write(b)
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

func writeSynthetic(path string, d time.Duration) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := loadgen.WriteWAV(f, loadgen.Synthetic(d, 1)); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}
