package sttest

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Recorded speech: utterances spoken by people, from Debian packages, so
// that the recogniser is measured on something other than synthesisers.
// Nothing of them is in the repository, and nothing the recogniser uses
// (language model, classifier, adaptation, settings) was made from them.
//
//   - The Asterisk PBX's English prompts (packages asterisk-core-sounds-en-wav
//     and asterisk-core-sounds-en, which holds their transcripts): Allison
//     Smith, a professional voice, at 8 kHz as a telephone line carries
//     it; CC-BY-SA-3.0.
//   - PocketSphinx's test recordings (package pocketsphinx-testdata): five
//     LibriVox sentences read by a volunteer, and five playing-card
//     phrases ("eight of spades four of clubs seven of hearts") from its
//     grammar test, both at 16 kHz.
const (
	AsteriskDir      = "/usr/share/asterisk/sounds/en_US_f_Allison"
	AsteriskText     = "/usr/share/doc/asterisk-core-sounds-en/core-sounds-en.txt.gz"
	LibriVoxDir      = "/usr/share/pocketsphinx/test/data/librivox"
	CardsDir         = "/usr/share/pocketsphinx/test/data/cards"
	RecordedPackages = "asterisk-core-sounds-en-wav asterisk-core-sounds-en pocketsphinx-testdata"
)

// Human is the pseudo-voice of recorded utterances. Synth cannot speak for
// it: only utterances with a recording have its audio.
var Human = Voice{Name: "human", Program: "recorded"}

// Recording is an utterance someone spoke, with its transcript.
type Recording struct {
	ID     string // the source and the file's name, e.g. "asterisk/vm-goodbye"
	Source string // "asterisk" (8 kHz), "librivox" or "cards" (16 kHz)
	Text   string
	Path   string // a WAV file
}

// ErrNoRecordings is returned when the packages of recorded speech are not
// installed.
var ErrNoRecordings = errors.New("sttest: recorded speech not installed (apt-get install " + RecordedPackages + ")")

// Recordings returns the recorded utterances whose transcripts are plain
// words, each known to known (a pronunciation dictionary's words, lower
// case): prompts with digits, symbols ("press #"), bracketed sounds
// ("[beep]") or words the recogniser cannot spell are left out, since
// their reference is ambiguous or they cannot be recognised at all, and
// skipped reports how many.
func Recordings(known func(word string) bool) (recs []Recording, skipped int, err error) {
	ast, skipA, err := asteriskPrompts(known)
	if err != nil {
		return nil, 0, err
	}
	lib, skipL, err := transcribed(LibriVoxDir, "transcription", "librivox", known)
	if err != nil {
		return nil, 0, err
	}
	cards, skipC, err := transcribed(CardsDir, "cards.transcription", "cards", known)
	if err != nil {
		return nil, 0, err
	}
	return append(append(ast, lib...), cards...), skipA + skipL + skipC, nil
}

func asteriskPrompts(known func(string) bool) ([]Recording, int, error) {
	f, err := os.Open(AsteriskText)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, ErrNoRecordings
	}
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, 0, fmt.Errorf("sttest: %s: %w", AsteriskText, err)
	}
	var (
		out     []Recording
		skipped int
	)
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, ";") {
			continue
		}
		name, text, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		path := filepath.Join(AsteriskDir, name+".wav")
		if _, err := os.Stat(path); err != nil {
			continue // listed, not shipped as WAV
		}
		if !plainWords(text, known) {
			skipped++
			continue
		}
		out = append(out, Recording{ID: "asterisk/" + name, Source: "asterisk", Text: text, Path: path})
	}
	if err := sc.Err(); err != nil {
		return nil, 0, fmt.Errorf("sttest: %s: %w", AsteriskText, err)
	}
	if len(out) == 0 {
		return nil, 0, ErrNoRecordings
	}
	return out, skipped, nil
}

// transcribed reads one of PocketSphinx's test transcriptions in dir
// ("<s> words </s> (id)", the recording dir/id.wav).
func transcribed(dir, file, source string, known func(string) bool) ([]Recording, int, error) {
	data, err := os.ReadFile(filepath.Join(dir, file))
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, ErrNoRecordings
	}
	if err != nil {
		return nil, 0, err
	}
	var (
		out     []Recording
		skipped int
	)
	for _, line := range strings.Split(string(data), "\n") {
		open := strings.LastIndex(line, "(")
		if open < 0 || !strings.HasSuffix(strings.TrimSpace(line), ")") {
			continue
		}
		id := strings.TrimSuffix(strings.TrimSpace(line[open+1:]), ")")
		text := strings.NewReplacer("<s>", "", "</s>", "").Replace(line[:open])
		path := filepath.Join(dir, id+".wav")
		if _, err := os.Stat(path); err != nil {
			continue
		}
		if !plainWords(text, known) {
			skipped++
			continue
		}
		out = append(out, Recording{ID: source + "/" + id, Source: source, Text: strings.Join(strings.Fields(text), " "), Path: path})
	}
	return out, skipped, nil
}

// plainWords reports whether text is words and punctuation only, every
// word known.
func plainWords(text string, known func(string) bool) bool {
	if strings.ContainsAny(text, "0123456789#*[]()/&@%$\"+=_<>") {
		return false
	}
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r == '\'')
	})
	if len(words) == 0 {
		return false
	}
	for _, w := range words {
		if w = strings.Trim(w, "'"); w != "" && !known(w) {
			return false
		}
	}
	return true
}
