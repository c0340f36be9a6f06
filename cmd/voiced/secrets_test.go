package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// syncBuf is a log sink safe for concurrent writes.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestUsageHidesSecrets: the usage text, printed by -h and by every flag
// error (a typo in a unit file goes to the journal), shows no secret from
// the environment.
func TestUsageHidesSecrets(t *testing.T) {
	env := func(k string) string {
		switch k {
		case "VOICED_RESUME_SECRET":
			return "resume-secret-value"
		case "VOICED_REDIS_URL":
			return "redis://:redis-password@10.0.0.5:6379/0"
		case "VOICED_TOKENS":
			return "token-value"
		case "VOICED_TWILIO_AUTH_TOKEN":
			return "twilio-auth-value"
		}
		return ""
	}
	for _, args := range [][]string{{"-h"}, {"-max-sesions", "10"}} {
		var stderr bytes.Buffer
		_, err := parseFlags(args, env, &stderr)
		require.Error(t, err)
		require.Contains(t, stderr.String(), "-resume-secret")
		for _, secret := range []string{"resume-secret-value", "redis-password", "token-value", "twilio-auth-value"} {
			require.NotContains(t, stderr.String(), secret, "voiced %v", args)
		}
	}
	c, err := parseFlags(nil, env, &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, "resume-secret-value", c.fleet.resumeSecret, "the environment is still read")
	require.Equal(t, "redis://:redis-password@10.0.0.5:6379/0", c.fleet.redis.URL)
	require.Equal(t, "twilio-auth-value", c.session.TwilioAuthToken)
}

// TestRedisPasswordNotInError: a -redis URL that does not parse is
// refused without its password.
func TestRedisPasswordNotInError(t *testing.T) {
	// An unencoded '/', '#' or '?' in a password makes the parser take
	// part of it for a host, a port or a path, which its errors quote.
	for _, url := range []string{
		"redis://:s3cret-pw@127.0.0.1:63x79/0",
		"redis://default:s3cret/pw@10.0.0.5:6379/0",
		"redis://default:s3cret#pw@10.0.0.5:6379/0",
		"redis://default:123/s3cret@10.0.0.5:6379/0",
	} {
		env := func(k string) string {
			if k == "VOICED_REDIS_URL" {
				return url
			}
			return ""
		}
		var logs syncBuf
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		err := run(ctx, []string{"-addr", "127.0.0.1:0", "-admin-addr", "off", "-stages", "sim", "-log-format", "json"}, env, &logs, &logs)
		cancel()
		require.ErrorContains(t, err, "-redis", url)
		for _, part := range []string{"s3cret", "pw@"} {
			require.NotContains(t, err.Error(), part, url)
			require.NotContains(t, logs.String(), part, url)
		}
	}
}

// TestAdminListenFailureStopsServer: when -admin-addr cannot be listened
// on, run returns with the public listener closed, not left serving.
func TestAdminListenFailureStopsServer(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	addr := freeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var logs syncBuf
	err = run(ctx, []string{"-addr", addr, "-admin-addr", busy.Addr().String(), "-stages", "sim", "-log-format", "json"},
		func(string) string { return "" }, &logs, &logs)
	require.ErrorContains(t, err, "-admin-addr")
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + addr + "/healthz")
	if err == nil {
		resp.Body.Close()
		t.Fatalf("run returned, but %s still serves: /healthz %d", addr, resp.StatusCode)
	}
}

// TestEmptyFlagOverridesEnv: -redis= given empty means this instance's
// memory only, whatever VOICED_REDIS_URL says (as when the variable was
// the flag's default).
func TestEmptyFlagOverridesEnv(t *testing.T) {
	env := func(k string) string {
		switch k {
		case "VOICED_REDIS_URL":
			return "redis://10.0.0.5:6379/0"
		case "VOICED_RESUME_SECRET":
			return "from-env-0123456789"
		}
		return ""
	}
	c, err := parseFlags([]string{"-redis=", "-resume-secret", "from-flag-0123456789"}, env, &bytes.Buffer{})
	require.NoError(t, err)
	require.Empty(t, c.fleet.redis.URL)
	require.Equal(t, "from-flag-0123456789", c.fleet.resumeSecret)
}

// TestStrayArgumentsNotEchoed: flag parsing stops at the first argument
// that is not a flag, so a boolean flag given a separate value
// (`-log-transcripts false`, as other flags take theirs) leaves every
// flag after it stray; the error must not quote them, since they hold
// -auth-token, -resume-secret or a -redis URL with its password (the
// error goes to the journal, like the usage text).
func TestStrayArgumentsNotEchoed(t *testing.T) {
	for _, args := range [][]string{
		{"-log-transcripts", "false", "-auth-token", "tok-s3cret"},
		{"-insecure-no-auth", "true", "-resume-secret", "s3cret-resume"},
		{"-stages", "sim", "-redis", "redis://:pw-s3cret@10.0.0.5:6379/0", "extra"},
		{"-auth-token", "tok1,", "tok-s3cret"}, // a space after a comma
	} {
		var stderr bytes.Buffer
		_, err := parseFlags(args, func(string) string { return "" }, &stderr)
		require.ErrorContains(t, err, "unexpected argument", "%v", args)
		require.NotContains(t, err.Error(), "s3cret", "%v", args)
		require.NotContains(t, stderr.String(), "s3cret", "%v", args)
	}
}

// TestShortResumeSecretRefused: a resume secret shorter than 16 bytes,
// from the flag or the environment, is refused, naming the flag and not
// the secret; a guessable one lets anyone forge resume tokens.
func TestShortResumeSecretRefused(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		env     string
		wantErr bool
	}{
		{args: []string{"-resume-secret", "pw-15-bytes-abc"}, wantErr: true},
		{env: "pw-15-bytes-abc", wantErr: true},
		{args: []string{"-resume-secret", "pw-16-bytes-abcd"}},
		{env: "pw-16-bytes-abcd"},
		{}, // none: a random one
	} {
		_, err := parseFlags(tt.args, func(k string) string {
			if k == "VOICED_RESUME_SECRET" {
				return tt.env
			}
			return ""
		}, &bytes.Buffer{})
		if !tt.wantErr {
			require.NoError(t, err, "%v %q", tt.args, tt.env)
			continue
		}
		require.ErrorContains(t, err, "-resume-secret (or VOICED_RESUME_SECRET) is shorter than 16 bytes")
		require.NotContains(t, err.Error(), "pw-15")
	}
}
