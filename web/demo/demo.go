// Package demo embeds the browser demo that voiced serves at /.
package demo

import (
	"embed"
	"io/fs"
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
