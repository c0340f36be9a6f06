package llm

import (
	"cmp"
	"flag"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/voiced/voiced/internal/stages/llm/openai"
)

// ProviderConfig configures one provider of the chain.
type ProviderConfig struct {
	// Model defaults per provider: gpt-4o-mini, claude-haiku-4-5, gemini-2.5-flash.
	Model string
	// BaseURL overrides the API base, in the convention of the provider's
	// SDK: Anthropic's and Gemini's without the API version
	// (https://api.anthropic.com; one ending in /v1 or /v1beta works as
	// well), OpenAI's ending where /chat/completions starts, usually in
	// /v1 (any OpenAI-compatible server such as Ollama, llama.cpp server or
	// vLLM; a bare host gets /v1). FromEnv fills it from the SDKs'
	// variable when the flag is not set.
	BaseURL string
	// baseURLEnv is the environment variable BaseURL came from, if any.
	baseURLEnv string
	// APIKey comes from the environment (FromEnv), never from a flag, so it
	// does not show in the process list.
	APIKey string
	// Cap is the longest one attempt may take. Default 650ms.
	Cap time.Duration
	// TTFTLimit abandons an attempt that sends no text this long after it
	// started: a connected but silent provider must not eat the budget.
	// Default 350ms.
	TTFTLimit time.Duration
	// StartTTFT and StartTPS are the time to first token and tokens per
	// second assumed before voiced has learned them. Defaults 250ms, 60.
	StartTTFT time.Duration
	StartTPS  float64
	// MaxTokensField (OpenAI-compatible only): max_completion_tokens,
	// max_tokens or both; empty picks by base URL (see package openai).
	MaxTokensField string
}

func (p ProviderConfig) withDefaults(model string) ProviderConfig {
	p.Model = cmp.Or(p.Model, model)
	p.Cap = cmp.Or(p.Cap, 650*time.Millisecond)
	p.TTFTLimit = cmp.Or(p.TTFTLimit, 350*time.Millisecond)
	p.StartTTFT = cmp.Or(p.StartTTFT, 250*time.Millisecond)
	p.StartTPS = cmp.Or(p.StartTPS, 60)
	return p
}

// Provider names accepted in Config.Order.
const (
	OpenAI    = "openai"
	Anthropic = "anthropic"
	Gemini    = "gemini"
)

// Config configures the LLM chain. The zero value means the documented
// defaults, and with no API key the chain is just the extractive
// responder.
type Config struct {
	// Order is the comma-separated provider order; providers without a
	// key are left out. Default "openai,anthropic,gemini".
	Order string
	// OpenAI, Anthropic and Gemini configure each provider.
	OpenAI, Anthropic, Gemini ProviderConfig
	// System is the system instruction. Default: a help-desk voice
	// assistant that answers in one to three short spoken sentences.
	System string
	// HistoryTurns is how many earlier turns are sent. Default 4.
	HistoryTurns int
	// Reserve is the time kept at the end of the chain's deadline for the
	// extractive answer. Default 30ms.
	Reserve time.Duration
	// DefaultBudget is the chain's deadline when Generate's ctx has none.
	// Default 700ms.
	DefaultBudget time.Duration
	// MaxRetries is the retries per provider (on transient and rate-limit
	// kinds). Default 1; negative means none.
	MaxRetries int
	// RetryBaseDelay is the first backoff (doubled each retry, with
	// jitter) when the server gives no wait. Default 50ms.
	RetryBaseDelay time.Duration
	// StallLimit ends a stream that sends nothing for this long after its
	// first piece. Default 300ms.
	StallLimit time.Duration
	// MinTokens is the "few tokens" an attempt must be expected to
	// produce in the time left to be started at all. Default 8.
	MinTokens int
	// MaxOutputTokens caps every answer (a spoken answer is short);
	// the budget may lower it. Default 160.
	MaxOutputTokens int
	// AuthFallback makes authentication failures fall back to the next
	// provider. Default false: a broken key stops at the extractive answer
	// with an alert-level log, so it is not hidden.
	AuthFallback bool
	// BreakerFailures is the consecutive failures that open a provider's
	// breaker. Default 5.
	BreakerFailures int
	// BreakerOpen is how long an open breaker skips its provider before
	// letting one probe through. Default 30s.
	BreakerOpen time.Duration
	// RetryRatio, RetryPerSecond and RetryBurst shape the retry budget:
	// each request earns RetryRatio retries, time earns RetryPerSecond,
	// up to RetryBurst saved. Defaults 0.1, 0.5, 10.
	RetryRatio, RetryPerSecond, RetryBurst float64
	// LearnAlpha is the weight of each new sample in the learned time to
	// first token and tokens per second. Default 0.2.
	LearnAlpha float64
	// HTTPClient is used for every provider; default: a client with its
	// own transport (no client timeout: the context carries deadlines).
	HTTPClient *http.Client
	// Cooldowns holds the providers' cooldowns (429 with a wait, quota,
	// open breaker); default: this process's own (LocalCooldowns).
	Cooldowns Cooldowns

	// PricesFile is a price table to load (see LoadPrices); its entries
	// are added to Prices, replacing those of the same model.
	PricesFile string
	// Prices is the price of each model. A model without one costs 0.
	// Default: none (see Prices).
	Prices Prices
	// MaxCostPerConversation and MaxCostPerDay (US dollars; 0 means no
	// cap) stop the paid providers once the conversation's or the UTC
	// day's spend has reached them: the free providers and the extractive
	// responder answer, degraded cost_cap.
	MaxCostPerConversation, MaxCostPerDay float64
	// MaxCostPerTenantDay (US dollars; 0 means no cap) is the same per
	// tenant (pipeline.GenerateRequest.Tenant) and UTC day, counted in
	// the Ledger like the day's (through Redis in a fleet): one tenant
	// cannot spend the whole MaxCostPerDay. A request without a tenant
	// (a server without tokens) is not capped by it.
	MaxCostPerTenantDay float64
	// Ledger keeps the spending totals. Default: a NewMemoryLedger of
	// this process, keeping SpendKeep.
	Ledger SpendLedger
	// SpendKeep is how long a conversation's spend is kept after its last
	// addition, so that its cap still holds when it is resumed: the
	// longest a conversation can be continued. Default (and least): a
	// day, MinSpendKeep.
	SpendKeep time.Duration
	// SpendTimeout bounds each ledger call. Default 20ms.
	SpendTimeout time.Duration
}

// Validate refuses settings that would break every answer or silently
// disable a limit: a negative duration or count (a negative stall limit
// cut every answer after its first piece; -1 breaker failures became
// 2^32-1, a breaker that never opens), and floats that are not finite or
// are out of range. Zero means the default everywhere, and a negative
// MaxRetries means none. Names are those of the flags.
func (c Config) Validate() error {
	for _, p := range []struct {
		name string
		pc   ProviderConfig
	}{{OpenAI, c.OpenAI}, {Anthropic, c.Anthropic}, {Gemini, c.Gemini}} {
		err := cmp.Or(
			notNegative(named[time.Duration]{p.name + ".cap", p.pc.Cap}, named[time.Duration]{p.name + ".ttft-limit", p.pc.TTFTLimit},
				named[time.Duration]{p.name + ".start-ttft", p.pc.StartTTFT}),
			finiteNotNegative(named[float64]{p.name + ".start-tps", p.pc.StartTPS}))
		if err != nil {
			return err
		}
	}
	err := cmp.Or(
		notNegative(named[time.Duration]{"reserve", c.Reserve}, named[time.Duration]{"default-budget", c.DefaultBudget},
			named[time.Duration]{"retry-base-delay", c.RetryBaseDelay}, named[time.Duration]{"stall-limit", c.StallLimit},
			named[time.Duration]{"breaker-open", c.BreakerOpen}, named[time.Duration]{"spend-timeout", c.SpendTimeout}),
		finiteNotNegative(named[float64]{"retry-ratio", c.RetryRatio}, named[float64]{"retry-per-second", c.RetryPerSecond},
			named[float64]{"retry-burst", c.RetryBurst}, named[float64]{"learn-alpha", c.LearnAlpha},
			named[float64]{"max-cost-per-conversation", c.MaxCostPerConversation}, named[float64]{"max-cost-per-day", c.MaxCostPerDay},
			named[float64]{"max-cost-per-tenant-day", c.MaxCostPerTenantDay}),
		notNegative(named[int]{"history-turns", c.HistoryTurns}, named[int]{"min-tokens", c.MinTokens},
			named[int]{"max-output-tokens", c.MaxOutputTokens}, named[int]{"breaker-failures", c.BreakerFailures}))
	if err == nil && c.LearnAlpha > 1 {
		err = fmt.Errorf("-llm.learn-alpha %v: want at most 1", c.LearnAlpha)
	}
	if err == nil && c.BreakerFailures > math.MaxUint32 {
		// The breaker counts in 32 bits: 2^32 would become 0 and open it
		// at the first failure.
		err = fmt.Errorf("-llm.breaker-failures %d: want at most %d", c.BreakerFailures, uint32(math.MaxUint32))
	}
	if err == nil {
		names, oerr := c.order()
		if oerr != nil {
			err = fmt.Errorf("-llm.order %q: %w", c.Order, oerr)
		}
		// New checks them too, but voiced builds the chain only once its
		// classifier is trained and its index built, seconds later.
		for _, n := range names {
			if pc := c.providers()[n]; pc.APIKey != "" {
				err = cmp.Or(err, checkBaseURL(n, *pc))
			}
		}
	}
	if err == nil {
		// The provider checks it too, but it is built only with a key.
		if ferr := openai.CheckMaxTokensField(c.OpenAI.MaxTokensField); ferr != nil {
			err = fmt.Errorf("-llm.openai.max-tokens-field %q: %w", c.OpenAI.MaxTokensField, ferr)
		}
	}
	if err == nil {
		if perr := c.Prices.validate(); perr != nil {
			err = fmt.Errorf("llm: prices: %w", perr)
		}
	}
	return err
}

// named is a setting's value with its flag's name after "-llm.", for
// Validate's messages.
type named[T any] struct {
	name string
	v    T
}

func notNegative[T time.Duration | int](vs ...named[T]) error {
	for _, n := range vs {
		if n.v < 0 {
			return fmt.Errorf("-llm.%s %v: must not be negative", n.name, n.v)
		}
	}
	return nil
}

// finiteNotNegative also refuses NaN, which passes every comparison.
func finiteNotNegative(vs ...named[float64]) error {
	for _, n := range vs {
		if !(n.v >= 0) || math.IsInf(n.v, 0) {
			return fmt.Errorf("-llm.%s %v: want a finite number >= 0 (0: the default)", n.name, n.v)
		}
	}
	return nil
}

// DefaultSystem is the default system instruction.
const DefaultSystem = "You are the voice of a help desk, speaking to a caller. Answer in one to three short, plain " +
	"spoken sentences: no lists, no markdown, no links, no emoji. Base the answer on the reference passages; if they do " +
	"not answer the question, say so briefly and offer to connect the caller to a person."

func (c Config) withDefaults() Config {
	c.Order = cmp.Or(c.Order, "openai,anthropic,gemini")
	c.OpenAI = c.OpenAI.withDefaults("gpt-4o-mini")
	c.Anthropic = c.Anthropic.withDefaults("claude-haiku-4-5")
	c.Gemini = c.Gemini.withDefaults("gemini-2.5-flash")
	c.System = cmp.Or(c.System, DefaultSystem)
	c.HistoryTurns = cmp.Or(c.HistoryTurns, 4)
	c.Reserve = cmp.Or(c.Reserve, 30*time.Millisecond)
	c.DefaultBudget = cmp.Or(c.DefaultBudget, 700*time.Millisecond)
	c.MaxRetries = cmp.Or(c.MaxRetries, 1)
	c.MaxRetries = max(c.MaxRetries, 0)
	c.RetryBaseDelay = cmp.Or(c.RetryBaseDelay, 50*time.Millisecond)
	c.StallLimit = cmp.Or(c.StallLimit, 300*time.Millisecond)
	c.MinTokens = cmp.Or(c.MinTokens, 8)
	c.MaxOutputTokens = cmp.Or(c.MaxOutputTokens, 160)
	c.BreakerFailures = cmp.Or(c.BreakerFailures, 5)
	c.BreakerOpen = cmp.Or(c.BreakerOpen, 30*time.Second)
	if c.Cooldowns == nil {
		c.Cooldowns = NewLocalCooldowns()
	}
	c.RetryRatio = cmp.Or(c.RetryRatio, 0.1)
	c.RetryPerSecond = cmp.Or(c.RetryPerSecond, 0.5)
	c.RetryBurst = cmp.Or(c.RetryBurst, 10)
	c.LearnAlpha = cmp.Or(c.LearnAlpha, 0.2)
	c.SpendTimeout = cmp.Or(c.SpendTimeout, 20*time.Millisecond)
	return c
}

// RegisterFlags registers the chain's flags (all under "llm.") on fs,
// with c's current values as defaults. Keys are not flags: see FromEnv.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := c.withDefaults()
	fs.StringVar(&c.Order, "llm.order", d.Order, "LLM provider order (comma-separated: openai, anthropic, gemini); providers without an API key are skipped and the extractive responder always ends the chain")
	for _, p := range []struct {
		name string
		pc   *ProviderConfig
		def  ProviderConfig
	}{{OpenAI, &c.OpenAI, d.OpenAI}, {Anthropic, &c.Anthropic, d.Anthropic}, {Gemini, &c.Gemini, d.Gemini}} {
		pre := "llm." + p.name + "."
		fs.StringVar(&p.pc.Model, pre+"model", p.def.Model, p.name+" model")
		fs.StringVar(&p.pc.BaseURL, pre+"base-url", p.def.BaseURL, baseURLHelp[p.name])
		fs.DurationVar(&p.pc.Cap, pre+"cap", p.def.Cap, "longest one "+p.name+" attempt may take (0: the default)")
		fs.DurationVar(&p.pc.TTFTLimit, pre+"ttft-limit", p.def.TTFTLimit, "abandon an attempt at "+p.name+" that has sent no text after this long (0: the default)")
		fs.DurationVar(&p.pc.StartTTFT, pre+"start-ttft", p.def.StartTTFT, p.name+" time to first token assumed until learned (0: the default)")
		fs.Float64Var(&p.pc.StartTPS, pre+"start-tps", p.def.StartTPS, p.name+" output tokens per second assumed until learned (0: the default)")
	}
	fs.StringVar(&c.OpenAI.MaxTokensField, "llm.openai.max-tokens-field", d.OpenAI.MaxTokensField, "request field for the output cap: max_completion_tokens, max_tokens or both (empty: max_completion_tokens for OpenAI, max_tokens for other base URLs such as Ollama)")
	fs.DurationVar(&c.Reserve, "llm.reserve", d.Reserve, "time kept at the end of the LLM deadline for the extractive answer (0: the default)")
	fs.IntVar(&c.MaxRetries, "llm.max-retries", d.MaxRetries, "retries per provider on transient and rate-limit errors, within the deadline (0 means the default of 1; -1 disables retries)")
	fs.DurationVar(&c.StallLimit, "llm.stall-limit", d.StallLimit, "end a stream that sends nothing for this long after its first piece (0: the default)")
	fs.IntVar(&c.MaxOutputTokens, "llm.max-output-tokens", d.MaxOutputTokens, "ceiling on output tokens, which the time left may lower (0: the default)")
	fs.BoolVar(&c.AuthFallback, "llm.auth-fallback", d.AuthFallback, "fall back to the next provider on an authentication error (default: go straight to the extractive answer and alert)")
	fs.IntVar(&c.BreakerFailures, "llm.breaker-failures", d.BreakerFailures, "consecutive failures that open a provider's circuit breaker (0: the default)")
	fs.DurationVar(&c.BreakerOpen, "llm.breaker-open", d.BreakerOpen, "how long an open breaker skips its provider before one probe (0: the default)")
	fs.Float64Var(&c.RetryRatio, "llm.retry-ratio", d.RetryRatio, "retry budget: retries earned per request (0: the default)")
	fs.StringVar(&c.PricesFile, "llm.prices", d.PricesFile, "price table `FILE` (YAML or JSON: model: {input: USD, output: USD} per million tokens); models not in it cost 0, and without it the cost caps never trigger")
	fs.Float64Var(&c.MaxCostPerConversation, "llm.max-cost-per-conversation", d.MaxCostPerConversation, "US dollars one conversation may spend on paid LLM providers; then the free ones and the extractive responder answer, degraded cost_cap (0: no cap)")
	fs.Float64Var(&c.MaxCostPerDay, "llm.max-cost-per-day", d.MaxCostPerDay, "US dollars all conversations may spend on paid LLM providers per UTC day; then the free ones and the extractive responder answer, degraded cost_cap (0: no cap)")
	fs.Float64Var(&c.MaxCostPerTenantDay, "llm.max-cost-per-tenant-day", d.MaxCostPerTenantDay, "US dollars one tenant (access token; phone calls Twilio signed: the Twilio account) may spend on paid LLM providers per UTC day, counted like -llm.max-cost-per-day (fleet-wide with -redis, which then needs the fleet's -resume-secret: tokens' tenants are named with it); then its answers are degraded cost_cap; needs -auth-token (or -twilio.auth-token): without tokens there are no tenants (0: no cap)")
}

// baseURLHelp is each provider's -llm.NAME.base-url help.
var baseURLHelp = map[string]string{
	OpenAI: "OpenAI-compatible API base `URL`, the part before /chat/completions, usually ending in /v1; a bare host gets /v1 " +
		"(env " + baseURLEnv[OpenAI] + "; empty: OpenAI's)",
	Anthropic: "Anthropic API base `URL`, with or without /v1 (env " + baseURLEnv[Anthropic] + "; empty: Anthropic's)",
	Gemini:    "Gemini API base `URL`, with or without /v1beta (env " + baseURLEnv[Gemini] + "; empty: Google's)",
}

// baseURLEnv names the environment variable of each provider's base URL:
// the one its official SDKs read.
var baseURLEnv = map[string]string{
	OpenAI:    "OPENAI_BASE_URL",
	Anthropic: "ANTHROPIC_BASE_URL",
	Gemini:    "GOOGLE_GEMINI_BASE_URL",
}

// FromEnv reads the API keys from OPENAI_API_KEY, ANTHROPIC_API_KEY and
// GEMINI_API_KEY, and the base URLs the flags left empty from
// OPENAI_BASE_URL, ANTHROPIC_BASE_URL and GOOGLE_GEMINI_BASE_URL. Call it
// after parsing the flags.
func (c *Config) FromEnv(getenv func(string) string) {
	c.OpenAI.APIKey = strings.TrimSpace(getenv("OPENAI_API_KEY"))
	c.Anthropic.APIKey = strings.TrimSpace(getenv("ANTHROPIC_API_KEY"))
	c.Gemini.APIKey = strings.TrimSpace(getenv("GEMINI_API_KEY"))
	for name, pc := range c.providers() {
		if pc.BaseURL != "" {
			continue
		}
		env := baseURLEnv[name]
		if pc.BaseURL = strings.TrimSpace(getenv(env)); pc.BaseURL != "" {
			pc.baseURLEnv = env
		}
	}
}

// providers returns each provider's configuration by name.
func (c *Config) providers() map[string]*ProviderConfig {
	return map[string]*ProviderConfig{OpenAI: &c.OpenAI, Anthropic: &c.Anthropic, Gemini: &c.Gemini}
}

// baseURLSource names where a provider's base URL is set, for messages:
// the flag, and the environment variable when it came from there.
func baseURLSource(name string, pc ProviderConfig) string {
	flag := "-llm." + name + ".base-url"
	if pc.baseURLEnv != "" {
		return pc.baseURLEnv + " (or " + flag + ")"
	}
	return flag
}

// checkBaseURL refuses a base URL that is not an absolute http or https
// URL. The message names the setting and never echoes the URL, which
// could carry credentials.
func checkBaseURL(name string, pc ProviderConfig) error {
	if pc.BaseURL == "" {
		return nil
	}
	u, err := url.Parse(pc.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s: want an absolute http:// or https:// URL", baseURLSource(name, pc))
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%s: a base URL takes no query or fragment", baseURLSource(name, pc))
	}
	return nil
}

// order parses Order.
func (c Config) order() ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, n := range strings.Split(c.Order, ",") {
		n = strings.ToLower(strings.TrimSpace(n))
		if n == "" {
			continue
		}
		switch n {
		case OpenAI, Anthropic, Gemini:
		default:
			return nil, fmt.Errorf("llm: unknown provider %q in order (want openai, anthropic, gemini)", n)
		}
		if seen[n] {
			return nil, fmt.Errorf("llm: provider %q twice in order", n)
		}
		seen[n] = true
		out = append(out, n)
	}
	return out, nil
}
