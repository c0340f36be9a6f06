// Package demo embeds the browser demo that voiced serves at /.
package demo

import (
	"embed"
	"io/fs"
	"net/http"
	"regexp"
)

//go:embed static
var static embed.FS

// FS returns the demo's files, rooted at the page's directory.
func FS() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree always has it
	}
	return sub
}

// Handler serves the demo's files with a Content-Security-Policy that
// allows only what the page uses (see CSP) and X-Content-Type-Options:
// nosniff.
func Handler() http.Handler {
	files := http.FileServerFS(FS())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP(r.Host))
		h.Set("X-Content-Type-Options", "nosniff")
		files.ServeHTTP(w, r)
	})
}

// hostPattern is what a Host header may be to be named in the policy: a
// name or an IPv4 or bracketed IPv6 address, with an optional port.
// Anything else (a header that would break the policy's syntax) leaves
// the WebSocket to 'self' alone.
var hostPattern = regexp.MustCompile(`^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$`)

// CSP is the demo's Content-Security-Policy for a page served to host.
// Everything comes from the server itself: module scripts and the
// AudioWorklet module (script-src), the stylesheet, and the session's
// WebSocket (connect-src names ws:// and wss:// on host, for browsers
// whose 'self' does not cover WebSocket schemes). The favicon is an
// empty data: URL. There is no inline script or style, no plugin, no
// frame and no form.
func CSP(host string) string {
	connect := "'self'"
	if hostPattern.MatchString(host) {
		connect += " ws://" + host + " wss://" + host
	}
	return "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src " + connect + "; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}
