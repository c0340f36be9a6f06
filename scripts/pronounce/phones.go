package main

import (
	"fmt"
	"strings"
)

// espeakToCMU maps espeak-ng's English phoneme mnemonics (its -x output)
// to the CMU dictionary's phones. Longer mnemonics are matched first.
var espeakToCMU = map[string]string{
	"aI@": "AY ER", "aI3": "AY ER", "aU@": "AW ER", "aU3": "AW ER", "i@3": "IH R",
	"i@": "IH R", "e@": "EH R", "U@": "UH R", "O@": "AO R", "A@": "AA R", "o@": "AO R",
	"3r-": "ER", "3:": "ER", "3": "ER", "@L": "AH L", "@": "AH", "a#": "AH", "I#": "IH", "I2": "IH", "O2": "AO",
	"aI": "AY", "aU": "AW", "eI": "EY", "oU": "OW", "OI": "OY",
	"A:": "AA", "O:": "AO", "u:": "UW", "i:": "IY", "aa": "AE",
	"0": "AA", "V": "AH", "E": "EH", "I": "IH", "U": "UH", "a": "AE", "i": "IY", "u": "UW", "O": "AO", "A": "AA", "e": "EH", "o": "OW",
	"tS": "CH", "dZ": "JH", "t#": "T", "n-": "N", "l-": "L", "r-": "R", "?": "T",
	"D": "DH", "T": "TH", "S": "SH", "Z": "ZH", "N": "NG", "j": "Y", "h": "HH", "w": "W", "r": "R", "x": "K",
	"b": "B", "d": "D", "f": "F", "g": "G", "k": "K", "l": "L", "m": "M", "n": "N", "p": "P", "s": "S", "t": "T", "v": "V", "z": "Z",
}

// ToCMU converts espeak-ng phonemes ("h'Udi") to CMU phones ("HH UH D IY").
// Stress and syllable marks are dropped; an unknown mnemonic is an error.
func ToCMU(ph string) (string, error) {
	var out []string
	ph = strings.NewReplacer("'", "", ",", "", "%", "", "=", "", "_", "", "!", "", ";", "", " ", "").Replace(ph)
	for i := 0; i < len(ph); {
		n := 0
		for l := min(3, len(ph)-i); l > 0; l-- {
			if _, ok := espeakToCMU[ph[i:i+l]]; ok {
				n = l
				break
			}
		}
		if n == 0 {
			if ph[i] == ':' { // a length mark the table does not pair
				i++
				continue
			}
			return "", fmt.Errorf("unknown espeak-ng phoneme at %q", ph[i:])
		}
		out = append(out, espeakToCMU[ph[i:i+n]])
		i += n
	}
	if len(out) == 0 {
		return "", fmt.Errorf("no phonemes in %q", ph)
	}
	return strings.Join(out, " "), nil
}
