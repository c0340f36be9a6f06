package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The server metrics voiceload reads; any Go server with the default
// process and Go collectors exposes them.
const (
	metricCPU        = "process_cpu_seconds_total"
	metricRSS        = "process_resident_memory_bytes"
	metricHeapInuse  = "go_memstats_heap_inuse_bytes"
	metricGoroutines = "go_goroutines"
	// voiced's own count of terminal messages it sent after their
	// deadline, to tell its lateness from the client's view of it.
	metricServerLate = "voiced_late_terminals_total"
	// voiced's count of audio frames it accepted, for its CPU per frame.
	metricServerFrames = "voiced_audio_frames_total"
	// voiced's histogram from a cancel read to the cancelled request's
	// terminal written: the server's side of "cancel -> terminal".
	metricServerCancel = "voiced_cancel_to_terminal_seconds"
	// voiced's histogram from a refused request's first frame read to its
	// overloaded written: the server's side of "first frame ->
	// overloaded".
	metricServerRefusal = "voiced_refusal_seconds"
)

// sample is one scrape's values.
type sample struct {
	at                        time.Time
	cpu, rss, heap, goroutine float64
	late                      *float64 // nil when the server does not export it
	frames                    *float64 // nil when the server does not export it
	cancel, refusal           *dto.Histogram
}

// scraper reads the server's /metrics during the run.
type scraper struct {
	url    string
	client *http.Client

	mu      sync.Mutex
	samples []sample // guarded by mu
	held    int      // samples[:held] were taken while an idle run held its sessions; guarded by mu
	errs    int      // guarded by mu
	lastErr string   // guarded by mu
}

func newScraper(url string) *scraper {
	return &scraper{url: url, client: &http.Client{Timeout: 5 * time.Second}}
}

func (s *scraper) loop(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.scrape(ctx)
		}
	}
}

// scrape takes one sample and reports whether it got one.
func (s *scraper) scrape(ctx context.Context) bool {
	smp, err := s.fetch(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.errs++
		s.lastErr = err.Error()
		return false
	}
	s.samples = append(s.samples, smp)
	return true
}

// scrapeHeld scrapes while an idle run still holds every session, and
// marks the samples so far as the run's idle part: the sessions' teardown
// that follows (every one of them waking to read its close) is not
// memory an idle session holds. When that scrape fails there is no idle
// figure, rather than one whose "held" sample was taken earlier.
func (s *scraper) scrapeHeld(ctx context.Context) {
	if !s.scrape(ctx) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = len(s.samples)
}

func (s *scraper) fetch(ctx context.Context) (sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return sample{}, fmt.Errorf("scrape: %w", err)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return sample{}, fmt.Errorf("scrape: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		// What a voiced given tokens answers on its -addr: it serves
		// /metrics on its admin listener only.
		return sample{}, fmt.Errorf("scrape: HTTP 404 from %s (a server with tokens serves /metrics on its admin listener, -admin-addr, only: point -metrics-url there, or set it to off)", s.url)
	}
	if resp.StatusCode != http.StatusOK {
		return sample{}, fmt.Errorf("scrape: HTTP %d", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return sample{}, fmt.Errorf("scrape: %w", err)
	}
	return sample{
		at:        time.Now(),
		cpu:       value(fams[metricCPU]),
		rss:       value(fams[metricRSS]),
		heap:      value(fams[metricHeapInuse]),
		goroutine: value(fams[metricGoroutines]),
		late:      optional(fams[metricServerLate]),
		frames:    optional(fams[metricServerFrames]),
		cancel:    histogram(fams[metricServerCancel]),
		refusal:   histogram(fams[metricServerRefusal]),
	}, nil
}

// value is the sum over a family's series of their counter or gauge
// values; 0 when the family is absent.
func value(f *dto.MetricFamily) float64 {
	if f == nil {
		return 0
	}
	var v float64
	for _, m := range f.GetMetric() {
		switch {
		case m.GetCounter() != nil:
			v += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			v += m.GetGauge().GetValue()
		case m.GetUntyped() != nil:
			v += m.GetUntyped().GetValue()
		}
	}
	return v
}

func optional(f *dto.MetricFamily) *float64 {
	if f == nil {
		return nil
	}
	v := value(f)
	return &v
}

// histogram is a family's one histogram; nil when it has none.
func histogram(f *dto.MetricFamily) *dto.Histogram {
	if f == nil || len(f.GetMetric()) != 1 {
		return nil
	}
	return f.GetMetric()[0].GetHistogram()
}

// Bound is a quantile read from a server histogram: the upper bound of
// the bucket it falls in (the histogram cannot say more), over Count
// observations made during the run.
type Bound struct {
	Count uint64  `json:"count"`
	P99Ms float64 `json:"p99AtMostMs"`
	MaxMs float64 `json:"maxAtMostMs"` // the bucket of the slowest; +Inf past the last
}

// MarshalJSON writes a bound past the histogram's last bucket (+Inf,
// which JSON cannot carry) as null, so that a run whose slowest
// observation overflowed the buckets still gets its report.
func (b Bound) MarshalJSON() ([]byte, error) {
	finite := func(v float64) *float64 {
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return nil
		}
		return &v
	}
	return json.Marshal(struct {
		Count uint64   `json:"count"`
		P99Ms *float64 `json:"p99AtMostMs"`
		MaxMs *float64 `json:"maxAtMostMs"`
	}{b.Count, finite(b.P99Ms), finite(b.MaxMs)})
}

// bound is the p99 and the largest of the observations last has over
// first, as bucket upper bounds; nil when there were none.
func bound(first, last *dto.Histogram) *Bound {
	if first == nil || last == nil {
		return nil
	}
	n := last.GetSampleCount() - first.GetSampleCount()
	if n == 0 {
		return nil
	}
	b := &Bound{Count: n, P99Ms: math.Inf(1), MaxMs: math.Inf(1)}
	want := uint64(math.Ceil(0.99 * float64(n)))
	p99Found := false
	for i, lb := range last.GetBucket() {
		c := lb.GetCumulativeCount()
		if i < len(first.GetBucket()) {
			c -= first.GetBucket()[i].GetCumulativeCount()
		}
		if !p99Found && c >= want {
			b.P99Ms, p99Found = lb.GetUpperBound()*1e3, true
		}
		if c == n {
			b.MaxMs = lb.GetUpperBound() * 1e3
			break
		}
	}
	return b
}

// ServerStats summarises the server's resource use during the run, from
// its /metrics.
type ServerStats struct {
	Scrapes   int    `json:"scrapes"`
	Errors    int    `json:"errors"`
	LastError string `json:"lastError,omitempty"`
	// CPUSeconds is the CPU the server used between the first and the
	// last scrape; AvgCores is that over the wall time, PeakCores the
	// highest between two scrapes.
	CPUSeconds float64 `json:"cpuSeconds"`
	AvgCores   float64 `json:"avgCores"`
	PeakCores  float64 `json:"peakCores"`
	// Resident memory and Go heap in use: before the load, highest, last.
	RSSStartBytes     float64 `json:"rssStartBytes"`
	RSSMaxBytes       float64 `json:"rssMaxBytes"`
	RSSEndBytes       float64 `json:"rssEndBytes"`
	HeapInuseStart    float64 `json:"heapInuseStartBytes"`
	HeapInuseMaxBytes float64 `json:"heapInuseMaxBytes"`
	GoroutinesStart   float64 `json:"goroutinesStart"`
	GoroutinesMax     float64 `json:"goroutinesMax"`
	// Idle runs only: the highest resident memory and heap in use from
	// the start until the last scrape with every session still open
	// (opening them included, closing them not), and that last scrape's.
	IdleRSSMaxBytes       float64 `json:"idleRssMaxBytes,omitempty"`
	IdleRSSHeldBytes      float64 `json:"idleRssHeldBytes,omitempty"`
	IdleHeapInuseMaxBytes float64 `json:"idleHeapInuseMaxBytes,omitempty"`
	// LateTerminals is how many terminal messages voiced itself counted
	// as sent after their deadline during the run; absent when the
	// server does not export voiced_late_terminals_total.
	LateTerminals *float64 `json:"lateTerminals,omitempty"`
	// CPUPerFrameUs is the server's CPU time over the audio frames it
	// accepted between the first and the last scrape, in microseconds:
	// everything the server did, divided by the frames. Absent when the
	// server does not export voiced_audio_frames_total or took none.
	CPUPerFrameUs *float64 `json:"cpuPerFrameUs,omitempty"`
	// CancelToTerminal is voiced's own measure from a cancel read to its
	// request's terminal written (voiced_cancel_to_terminal_seconds), as
	// bucket bounds; absent when the server does not export it or no
	// cancel was answered.
	CancelToTerminal *Bound `json:"cancelToTerminal,omitempty"`
	// Refusal is voiced's own measure from a refused request's first
	// frame read to its overloaded written (voiced_refusal_seconds), as
	// bucket bounds; absent when the server does not export it or refused
	// nothing.
	Refusal *Bound `json:"refusal,omitempty"`
}

func (s *scraper) stats() *ServerStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &ServerStats{Scrapes: len(s.samples), Errors: s.errs, LastError: s.lastErr}
	if len(s.samples) == 0 {
		return st
	}
	first, last := s.samples[0], s.samples[len(s.samples)-1]
	st.CPUSeconds = last.cpu - first.cpu
	if wall := last.at.Sub(first.at).Seconds(); wall > 0 {
		st.AvgCores = st.CPUSeconds / wall
	}
	st.RSSStartBytes, st.HeapInuseStart, st.GoroutinesStart = first.rss, first.heap, first.goroutine
	st.RSSEndBytes = last.rss
	if first.late != nil && last.late != nil {
		d := *last.late - *first.late
		st.LateTerminals = &d
	}
	if first.frames != nil && last.frames != nil && *last.frames > *first.frames {
		us := st.CPUSeconds / (*last.frames - *first.frames) * 1e6
		st.CPUPerFrameUs = &us
	}
	st.CancelToTerminal = bound(first.cancel, last.cancel)
	st.Refusal = bound(first.refusal, last.refusal)
	for i, x := range s.samples {
		st.RSSMaxBytes = max(st.RSSMaxBytes, x.rss)
		st.HeapInuseMaxBytes = max(st.HeapInuseMaxBytes, x.heap)
		st.GoroutinesMax = max(st.GoroutinesMax, x.goroutine)
		if i < s.held {
			st.IdleRSSMaxBytes = max(st.IdleRSSMaxBytes, x.rss)
			st.IdleHeapInuseMaxBytes = max(st.IdleHeapInuseMaxBytes, x.heap)
			st.IdleRSSHeldBytes = x.rss
		}
		if i > 0 {
			prev := s.samples[i-1]
			if wall := x.at.Sub(prev.at).Seconds(); wall > 0.2 {
				st.PeakCores = max(st.PeakCores, (x.cpu-prev.cpu)/wall)
			}
		}
	}
	return st
}

// latest is the last scrape, for the progress line.
func (s *scraper) latest() (cur, prev sample, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.samples)
	if n < 2 {
		return sample{}, sample{}, false
	}
	return s.samples[n-1], s.samples[n-2], true
}
