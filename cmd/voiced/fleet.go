package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/voiced/voiced/internal/fleet"
	"github.com/voiced/voiced/internal/session"
	"github.com/voiced/voiced/internal/stages/stt"
)

// fleetFlags configure resume and the fleet.
type fleetFlags struct {
	redis        fleet.Config
	resumeSecret string
	instanceID   string
	advertise    string
	agentAddr    string
	recognizers  int
}

func (f *fleetFlags) register(fs *flag.FlagSet, s *session.Config) {
	// The environment is read after the flags (fromEnv), not as their
	// defaults: a default is printed by -h and by every flag error, and
	// these may hold a password and the fleet's secret.
	fs.StringVar(&f.redis.URL, "redis", "", "Redis `URL` (redis://host:port/db) shared by a fleet: conversations, resume, provider cooldowns, LLM spend, instance registry (env VOICED_REDIS_URL); empty: this instance's memory only")
	fs.DurationVar(&f.redis.Budget, "redis.budget", 20*time.Millisecond, "bound on every Redis call; a call that runs out is skipped and local state used (0: the default)")
	fs.DurationVar(&f.redis.ResumeBudget, "redis.resume-budget", 0, "bound on each Redis read of a resume (the history at the upgrade, which no request waits on and without which the conversation continues without its history; then, only if that read answered, the history again and the missed terminals) (0: 10 x -redis.budget)")
	fs.StringVar(&f.resumeSecret, "resume-secret", "", "`secret` signing resume tokens, at least 16 bytes (say openssl rand -hex 16), the same on every instance of a fleet (env VOICED_RESUME_SECRET, preferred: a flag shows in the process list); empty: a random one, so tokens are valid on this process only")
	fs.DurationVar(&s.ConversationTTL, "conversation-ttl", 30*time.Minute, "how long a conversation's history is kept after its last turn (0: the default)")
	fs.DurationVar(&s.ResumeTTL, "resume-ttl", 0, "how long a resume token is valid (0: -conversation-ttl)")
	fs.StringVar(&f.instanceID, "instance-id", "", "this instance's `id` in session.ready and /v1/cluster (default: random)")
	fs.StringVar(&f.advertise, "advertise-addr", "", "`host:port` clients reach this instance at, shown in /v1/cluster (default: the -addr listener)")
	fs.StringVar(&f.agentAddr, "haproxy-agent-addr", "", "`host:port` to answer HAProxy's agent check on (ready/drain/maint and a weight from free recognisers); empty: off")
	fs.IntVar(&f.recognizers, "recognizers", 0, "recognitions this instance runs at once, the capacity behind freeRecognizers and the agent's weight (0: the embedded engine's pool, -stt.decoders or 4 per CPU)")
}

// fromEnv takes the flags not given (set holds those given, by name)
// from the environment: -redis= given empty still means memory only.
func (f *fleetFlags) fromEnv(getenv func(string) string, set map[string]bool) {
	if !set["redis"] {
		f.redis.URL = getenv("VOICED_REDIS_URL")
	}
	if !set["resume-secret"] {
		f.resumeSecret = getenv("VOICED_RESUME_SECRET")
	}
}

// validate checks the fleet flags.
func (f *fleetFlags) validate(s *session.Config) error {
	if s.ConversationTTL < 0 || s.ResumeTTL < 0 || f.redis.Budget < 0 || f.redis.ResumeBudget < 0 || f.recognizers < 0 {
		return fmt.Errorf("-conversation-ttl, -resume-ttl, -redis.budget, -redis.resume-budget and -recognizers must not be negative")
	}
	if n := len(f.resumeSecret); n > 0 && n < minResumeSecret {
		// Not quoted: it is a secret, and a flag error goes to the journal.
		return fmt.Errorf("-resume-secret (or VOICED_RESUME_SECRET) is shorter than %d bytes: anyone who guesses it can forge resume tokens to any conversation", minResumeSecret)
	}
	if f.redis.URL != "" {
		return fleet.CheckURL(f.redis.URL)
	}
	return nil
}

// minResumeSecret is the shortest -resume-secret accepted, in bytes: 128
// bits when random, out of reach of an offline search from one token.
const minResumeSecret = 16

// fleetRuntime is the running fleet machinery of one instance.
type fleetRuntime struct {
	redis    *fleet.Redis // nil without -redis
	registry *fleet.Registry
	state    *instanceState
	wg       sync.WaitGroup
	stop     context.CancelFunc
}

// instanceState reports this instance for the registry, the agent check
// and /v1/cluster, from the session server once it is live.
type instanceState struct {
	live        *atomic.Pointer[session.Server]
	id, addr    string
	recognizers int
}

var (
	_ fleet.AgentState = (*instanceState)(nil)
	_ fleet.Capacity   = (*instanceState)(nil)
)

func (st *instanceState) Ready() bool { return st.live.Load() != nil }

func (st *instanceState) Draining() bool {
	srv := st.live.Load()
	return srv != nil && srv.Draining()
}

func (st *instanceState) Sessions() int {
	if srv := st.live.Load(); srv != nil {
		return srv.Sessions()
	}
	return 0
}

func (st *instanceState) FreeRecognizers() int {
	srv := st.live.Load()
	if srv == nil {
		return 0
	}
	return max(st.recognizers-srv.InFlight(), 0)
}

func (st *instanceState) Full() bool {
	srv := st.live.Load()
	return srv != nil && srv.Full()
}

func (st *instanceState) Saturated() bool {
	srv := st.live.Load()
	return srv != nil && srv.Saturated()
}

func (st *instanceState) Recognizers() int { return st.recognizers }

// startFleet sets the resume and fleet parts of cfg up (the shared stores
// when -redis is set) and starts their background work: the Redis
// writer and refresh, the registry and the agent check. addr is the
// listener's address.
func startFleet(cfg *config, live *atomic.Pointer[session.Server], addr string, log *slog.Logger, reg prometheus.Registerer) (*fleetRuntime, error) {
	f := &cfg.fleet
	s := &cfg.session
	if s.ConversationTTL == 0 {
		s.ConversationTTL = 30 * time.Minute
	}
	// A conversation's spend is kept for as long as the conversation can
	// be continued, so that its cost cap still holds when it is.
	cfg.engines.llm.SpendKeep = max(s.ConversationTTL, s.ResumeTTL)
	if f.instanceID == "" {
		f.instanceID = randomID()
	}
	s.InstanceID = f.instanceID
	if f.resumeSecret != "" {
		s.ResumeSecret = []byte(f.resumeSecret)
	} else {
		s.ResumeSecret = session.NewResumeSecret()
		msg := "no -resume-secret (VOICED_RESUME_SECRET): a random one is used, so resume tokens are valid on this instance only"
		if f.redis.URL != "" {
			log.Warn(msg + "; every instance of a fleet needs the same secret")
		} else {
			log.Info(msg)
		}
	}
	if f.recognizers == 0 {
		// The embedded engine's pool: -stt.decoders when given (its own
		// default is 4 per CPU), so that the agent's weight is the share
		// of decoders free, whatever the pool's size.
		f.recognizers = 4 * runtime.NumCPU()
		if st := cfg.engines.stt; cfg.stages == "real" && (st.Engine == "" || st.Engine == stt.EngineSphinx) && st.Sphinx.Decoders > 0 {
			f.recognizers = st.Sphinx.Decoders
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	if f.advertise == "" {
		f.advertise = addr
	}
	rt := &fleetRuntime{stop: stop, state: &instanceState{live: live, id: f.instanceID, addr: f.advertise, recognizers: f.recognizers}}
	if f.redis.URL != "" {
		r, err := fleet.New(f.redis, log, reg)
		if err != nil {
			stop()
			return nil, err
		}
		rt.redis = r
		s.Conversations = fleet.NewConversations(r, s.ConversationTTL)
		cfg.engines.llm.Cooldowns = fleet.NewCooldowns(r, reg)
		cfg.engines.llm.Ledger = fleet.NewSpend(r, cfg.engines.llm.SpendKeep)
		rt.registry = fleet.NewRegistry(r, f.instanceID, f.advertise, rt.state, time.Second)
		rt.wg.Go(func() { r.Run(ctx) })
		log.Info("fleet: sharing state through redis", "instance", f.instanceID, "budget", r.Budget())
	}
	if f.agentAddr != "" {
		ln, err := net.Listen("tcp", f.agentAddr)
		if err != nil {
			rt.close()
			return nil, fmt.Errorf("listen on -haproxy-agent-addr: %w", err)
		}
		agent := fleet.NewAgent(rt.state, log)
		rt.wg.Go(func() {
			if err := agent.Serve(ctx, ln); err != nil {
				log.Error("haproxy agent stopped", "err", err)
			}
		})
		log.Info("haproxy agent listening", "addr", ln.Addr().String())
	}
	return rt, nil
}

// awaitRedis waits until the first Redis check has decided whether
// Redis is up, or ctx ends; without -redis it returns at once.
func (rt *fleetRuntime) awaitRedis(ctx context.Context) {
	if rt.redis == nil {
		return
	}
	select {
	case <-rt.redis.Checked():
	case <-ctx.Done():
	}
}

// close stops the fleet's background work and waits for it.
func (rt *fleetRuntime) close() {
	rt.stop()
	rt.wg.Wait()
}

// cluster lists the fleet's instances (only this one without Redis).
func (rt *fleetRuntime) cluster(ctx context.Context) []fleet.Instance {
	if rt.registry != nil {
		return rt.registry.List(ctx)
	}
	return []fleet.Instance{fleet.Describe(rt.state.id, rt.state.addr, rt.state)}
}

// randomID is a short random instance id.
func randomID() string { return uuid.NewString()[:8] }

// handleCluster serves GET /v1/cluster, authenticated like sessions.
func (rt *fleetRuntime) handleCluster(live *atomic.Pointer[session.Server]) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		srv := live.Load()
		if srv == nil {
			http.Error(w, "starting: engines warming up", http.StatusServiceUnavailable)
			return
		}
		if !srv.Authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="voiced"`)
			http.Error(w, "missing or invalid access token", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"instances": rt.cluster(r.Context())})
	}
}
