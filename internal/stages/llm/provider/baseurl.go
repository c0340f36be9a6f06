package provider

import (
	"net/url"
	"regexp"
	"strings"
)

// apiVersion matches a path segment that names an API version: v1,
// v1beta, v1alpha2.
var apiVersion = regexp.MustCompile(`^v[0-9]+((alpha|beta)[0-9]*)?$`)

// VersionedBase returns base without trailing slashes, with "/"+version
// appended unless its path already ends in an API version segment. The
// official SDKs of Anthropic and Gemini take a base URL without the
// version (https://api.anthropic.com) and add it themselves; voiced's
// flags used to want it included. Both forms mean the same API.
func VersionedBase(base, version string) string {
	base = strings.TrimRight(base, "/")
	u, err := url.Parse(base)
	if err != nil {
		return base // refused by configuration checks; nothing to add to
	}
	p := u.Path
	if apiVersion.MatchString(p[strings.LastIndex(p, "/")+1:]) {
		return base
	}
	return base + "/" + version
}

// HostOnlyBase returns base without trailing slashes, with "/"+version
// appended only when it has no path at all: an OpenAI-compatible base URL
// ends where /chat/completions starts, which servers put under any
// prefix (/v1, /api/v1, /openai/v1, /v1beta/openai), but a bare host is
// never such a base.
func HostOnlyBase(base, version string) string {
	base = strings.TrimRight(base, "/")
	u, err := url.Parse(base)
	if err != nil || u.Path != "" || u.Host == "" {
		return base
	}
	return base + "/" + version
}

// SafeURL is base for a log line: scheme, host and path, without user
// information, query or fragment, which could carry a secret.
func SafeURL(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return "(unparsable URL)"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}
