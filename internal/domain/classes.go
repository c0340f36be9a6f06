package domain

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strings"
)

// ClassesDir holds the word classes of the recogniser's domain language
// model: classes/NAME.txt, one word a line.
const ClassesDir = "classes"

// classWord is the form of a class member: one lower-case word, as the
// recogniser writes it.
var classWord = regexp.MustCompile(`^[a-z]+('[a-z]+)?$`)

// loadClasses reads classes/*.txt. A word may be in one class only.
func (d *Domain) loadClasses() error {
	names, err := fs.Glob(d.fsys, ClassesDir+"/*.txt")
	if err != nil {
		return fmt.Errorf("list classes: %w", err)
	}
	in := map[string]string{}
	for _, name := range names {
		if hidden(name) {
			continue
		}
		file := d.file(name)
		data, err := d.readText(name)
		if err != nil {
			return readError(err, "class")
		}
		class := strings.TrimSuffix(path.Base(name), ".txt")
		if !intentName.MatchString(class) {
			return &Error{File: file, Msg: "a class file's name must be lower-case letters, digits and underscores"}
		}
		n := 0
		for line := range strings.Lines(string(data)) {
			n++
			w := strings.TrimSpace(line)
			if w == "" || strings.HasPrefix(w, "#") {
				continue
			}
			if !classWord.MatchString(w) {
				return &Error{File: file, Line: n, Msg: fmt.Sprintf("%q is not one lower-case word", w)}
			}
			if prev, ok := in[w]; ok {
				return &Error{File: file, Line: n, Msg: fmt.Sprintf("%q is already in class %q", w, prev)}
			}
			in[w] = class
			if d.Classes == nil {
				d.Classes = map[string][]string{}
			}
			d.Classes[class] = append(d.Classes[class], w)
		}
		if len(d.Classes[class]) == 0 {
			return &Error{File: file, Msg: "empty class"}
		}
	}
	return nil
}
