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
		}
		return ""
	}
	for _, args := range [][]string{{"-h"}, {"-max-sesions", "10"}} {
		var stderr bytes.Buffer
		_, err := parseFlags(args, env, &stderr)
		require.Error(t, err)
		require.Contains(t, stderr.String(), "-resume-secret")
		for _, secret := range []string{"resume-secret-value", "redis-password", "token-value"} {
			require.NotContains(t, stderr.String(), secret, "voiced %v", args)
		}
	}
	c, err := parseFlags(nil, env, &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, "resume-secret-value", c.fleet.resumeSecret, "the environment is still read")
	require.Equal(t, "redis://:redis-password@10.0.0.5:6379/0", c.fleet.redis.URL)
}

// TestRedisPasswordNotInError: a -redis URL that does not parse is
// refused without its password.
func TestRedisPasswordNotInError(t *testing.T) {
	const pw = "s3cret-redis-pw"
	env := func(k string) string {
		if k == "VOICED_REDIS_URL" {
			return "redis://:" + pw + "@127.0.0.1:63x79/0"
		}
		return ""
	}
	var logs syncBuf
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	err := run(ctx, []string{"-addr", "127.0.0.1:0", "-admin-addr", "off", "-stages", "sim", "-log-format", "json"}, env, &logs, &logs)
	require.ErrorContains(t, err, "-redis")
	require.NotContains(t, err.Error(), pw)
	require.NotContains(t, logs.String(), pw)
}

// TestAdminListenFailureStopsServer: when -admin-addr cannot be listened
// on, run returns with the public listener closed, not left serving.
func TestAdminListenFailureStopsServer(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := free.Addr().String()
	free.Close()
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
