package lm

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// Sentences splits text (plain or light Markdown) into sentences and each
// sentence into lower-case words, written as they would be spoken: numbers,
// prices, times, percentages, e-mail addresses and common symbols are spelled
// out, because the recogniser can only produce words from its dictionary.
// Sentences with no words are dropped.
func Sentences(text string) [][]string {
	text = expand(text)
	var out [][]string
	for _, s := range sentenceEnd.Split(text, -1) {
		if ws := Words(s); len(ws) > 0 {
			out = append(out, ws)
		}
	}
	return out
}

// Normalize returns the words of text, spelled out as by Sentences, as one
// space-separated string with sentence boundaries removed. It is what a
// transcript should look like, so eval and tests compare Normalize(reference)
// with the recogniser's output.
func Normalize(text string) string {
	var all []string
	for _, s := range Sentences(text) {
		all = append(all, s...)
	}
	return strings.Join(all, " ")
}

// Words splits already expanded text into lower-case words made of letters
// and inner apostrophes ("don't" stays one word, "'quoted'" loses its quotes).
func Words(s string) []string {
	f := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !(unicode.IsLetter(r) || r == '\'' || r == '’')
	})
	out := f[:0]
	for _, w := range f {
		w = strings.ReplaceAll(w, "’", "'")
		w = strings.Trim(w, "'")
		if w != "" {
			out = append(out, w)
		}
	}
	return out
}

var (
	// A sentence ends at . ! ? ; or a line break (Markdown headings and list
	// items are sentences of their own). Decimal points and times were
	// spelled out before splitting, so a "." here is punctuation.
	sentenceEnd = regexp.MustCompile(`[.!?;]+(\s|$)|\n+`)

	reEmail   = regexp.MustCompile(`\b([A-Za-z0-9._%+-]+)@([A-Za-z0-9.-]+\.[A-Za-z]{2,})\b`)
	reURL     = regexp.MustCompile(`\b(?:https?://)?((?:www\.)?[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.(?:com|org|net|io|co|uk|us|shop|store))\b(/\S*)?`)
	reMoney   = regexp.MustCompile(`([$£€])\s?(\d[\d,]*)(?:\.(\d{1,2}))?`)
	reTime    = regexp.MustCompile(`\b(\d{1,2}):(\d{2})\s*([AaPp])\.?\s?[Mm]\b\.?|\b(\d{1,2}):(\d{2})\b`)
	reAmPm    = regexp.MustCompile(`\b(\d{1,2})\s*([AaPp])\.?\s?[Mm]\b\.?`)
	rePercent = regexp.MustCompile(`(\d+(?:\.\d+)?)\s?%`)
	reOrdinal = regexp.MustCompile(`\b(\d{1,3}(?:,\d{3})+|\d+)(st|nd|rd|th)\b`)
	reRange   = regexp.MustCompile(`\b(\d+)\s?[-–]\s?(\d+)\b`)
	reDecimal = regexp.MustCompile(`\b(\d{1,3}(?:,\d{3})+|\d+)\.(\d+)\b`)
	// A phone number with its area code (1-800-555-0142, (555) 123-4567,
	// 555.123.4567), or a local one whose second group a range could not
	// end with (555-0100): spelled digit by digit, as unformatted.
	rePhone = regexp.MustCompile(`(?:\b1[-.\s])?(?:\(\d{3}\)\s?|\b\d{3}[-.])\d{3}[-.]\d{4}\b|\b\d{3}-0\d{3}\b`)
	// A range of times (9am-5pm, 9-5:30pm), said with "to" as a range of
	// numbers is.
	reTimeRange = regexp.MustCompile(`\b(\d{1,2}(?::\d{2})?(?:\s*[AaPp]\.?\s?[Mm]\.?)?)\s?[-–]\s?(\d{1,2}(?::\d{2}(?:\s*[AaPp]\.?\s?[Mm]\b\.?)?|\s*[AaPp]\.?\s?[Mm]\b\.?))`)
	// A minus sign before a number (not a range, which is spelled first).
	reMinus   = regexp.MustCompile(`(^|[\s(])[-−](\d)`)
	reNumber  = regexp.MustCompile(`\d[\d,]*`)
	reHashNum = regexp.MustCompile(`#\s?(\d)`)
	reSlash   = regexp.MustCompile(`(\d+)/(\d+)`)
	// An ISO date (2026-12-07), said as a date is ("december seventh
	// twenty twenty six"), not as a year, a range and two numbers.
	reISODate = regexp.MustCompile(`\b(\d{4})-(\d{2})-(\d{2})\b`)
)

var months = []string{"january", "february", "march", "april", "may", "june",
	"july", "august", "september", "october", "november", "december"}

var symbols = strings.NewReplacer(
	"&", " and ",
	"+", " plus ",
	"=", " equals ",
	"@", " at ",
	"%", " percent ",
	"°", " degrees ",
)

// expand spells out what the recogniser can only hear as words: addresses,
// prices, dates, phone numbers, times, ordinals, ranges, decimals, numbers
// and symbols. The order matters: a pass must see its digits and marks
// before a more general one takes them (an address's or a price's dot
// before decimals, a date's, a phone number's and a time range's dashes
// before ranges, ordinals and decimals before plain numbers), and the
// symbols go last.
func expand(s string) string {
	s = reEmail.ReplaceAllStringFunc(s, spellEmail)
	s = reURL.ReplaceAllStringFunc(s, spellURL)
	s = reMoney.ReplaceAllStringFunc(s, spellMoney)
	s = reISODate.ReplaceAllStringFunc(s, spellISODate)
	s = rePhone.ReplaceAllStringFunc(s, func(m string) string { return " " + digits(m) + " " })
	s = reTimeRange.ReplaceAllString(s, "$1 to $2")
	s = reTime.ReplaceAllStringFunc(s, spellTime)
	s = reAmPm.ReplaceAllStringFunc(s, spellAmPm)
	s = rePercent.ReplaceAllString(s, "$1 percent")
	s = reOrdinal.ReplaceAllStringFunc(s, spellOrdinal)
	s = reSlash.ReplaceAllString(s, "$1 $2")
	s = reRange.ReplaceAllString(s, "$1 to $2")
	s = reMinus.ReplaceAllString(s, "${1}minus $2")
	s = reDecimal.ReplaceAllStringFunc(s, spellDecimal)
	s = reHashNum.ReplaceAllString(s, "number $1")
	s = reNumber.ReplaceAllStringFunc(s, func(m string) string { return " " + number(m) + " " })
	return symbols.Replace(s)
}

// spellEmail spells an e-mail address (reEmail's match) as it is read
// out: "jo dot smith at maple dot com".
func spellEmail(m string) string {
	p := reEmail.FindStringSubmatch(m)
	return " " + spellDots(p[1]) + " at " + spellDots(p[2]) + " "
}

// spellURL spells a web address (reURL's match) by its host alone: its
// scheme and path are dropped.
func spellURL(m string) string {
	p := reURL.FindStringSubmatch(m)
	host := strings.TrimPrefix(p[1], "www.")
	if strings.HasPrefix(p[1], "www.") {
		host = "w w w dot " + spellDots(host)
	} else {
		host = spellDots(host)
	}
	return " " + host + " "
}

// spellMoney spells a price (reMoney's match) in its currency's units and
// subunits: "$3.50" is "three dollars fifty cents", "$0.50" "fifty
// cents", "£1" "one pound".
func spellMoney(m string) string {
	p := reMoney.FindStringSubmatch(m)
	unit, sub := "dollars", "cents"
	switch p[1] {
	case "£":
		unit, sub = "pounds", "pence"
	case "€":
		unit, sub = "euros", "cents"
	}
	n := atoi(strings.ReplaceAll(p[2], ",", ""))
	if n == 1 {
		unit = strings.TrimSuffix(unit, "s")
	}
	out := " " + Cardinal(n) + " " + unit
	if n == 0 && p[3] != "" && atoi(p[3]) > 0 {
		out = "" // $0.50 is fifty cents
	}
	if p[3] != "" {
		c := p[3]
		if len(c) == 1 {
			c += "0"
		}
		if cents := atoi(c); cents > 0 {
			out += " " + Cardinal(cents)
			if cents == 1 && sub == "cents" {
				sub = "cent"
			}
			out += " " + sub
		}
	}
	return out + " "
}

// spellISODate spells an ISO date (reISODate's match) as a date is said;
// digits that are not a date are left to the later passes.
func spellISODate(m string) string {
	p := reISODate.FindStringSubmatch(m)
	month, day := atoi(p[2]), atoi(p[3])
	if month < 1 || month > 12 || day < 1 || day > 31 {
		return m // not a date: a range, or digits
	}
	return " " + months[month-1] + " " + Ordinal(day) + " " + number(p[1]) + " "
}

// spellTime spells a clock time (reTime's match, with or without am/pm):
// "9:00" is "nine o'clock", "9:05 pm" "nine oh five p m".
func spellTime(m string) string {
	p := reTime.FindStringSubmatch(m)
	h, mm, ap := p[1], p[2], p[3]
	if h == "" {
		h, mm = p[4], p[5]
	}
	out := " " + Cardinal(atoi(h))
	switch min := atoi(mm); {
	case min == 0 && ap == "":
		out += " o'clock"
	case min == 0:
	case min < 10:
		out += " oh " + Cardinal(min)
	default:
		out += " " + Cardinal(min)
	}
	if ap != "" {
		out += " " + strings.ToLower(ap) + " m"
	}
	return out + " "
}

// spellAmPm spells an hour with am or pm and no minutes (reAmPm's match):
// "9am" is "nine a m".
func spellAmPm(m string) string {
	p := reAmPm.FindStringSubmatch(m)
	return " " + Cardinal(atoi(p[1])) + " " + strings.ToLower(p[2]) + " m "
}

// spellOrdinal spells an ordinal (reOrdinal's match): "21st" is "twenty
// first".
func spellOrdinal(m string) string {
	p := reOrdinal.FindStringSubmatch(m)
	return " " + Ordinal(atoi(strings.ReplaceAll(p[1], ",", ""))) + " "
}

// spellDecimal spells a decimal number (reDecimal's match) with its
// fraction digit by digit: "2.75" is "two point seven five".
func spellDecimal(m string) string {
	p := reDecimal.FindStringSubmatch(m)
	return " " + number(p[1]) + " point " + digits(p[2]) + " "
}

// addressMarks spells the punctuation of e-mail addresses and host names.
var addressMarks = strings.NewReplacer(".", " dot ", "-", " dash ", "_", " underscore ")

// spellDots turns "maple-street.com" into "maple street dot com".
func spellDots(s string) string {
	s = addressMarks.Replace(s)
	return reNumber.ReplaceAllStringFunc(s, digits)
}

// number spells a run of digits (with optional thousands commas) as spoken:
// small numbers and comma-grouped ones as cardinals, likely years in pairs
// (the round ones from 1100 to 1900 in hundreds: "nineteen hundred"), and
// long unformatted runs (order or phone numbers) digit by digit.
func number(m string) string {
	plain := strings.ReplaceAll(m, ",", "")
	if plain == "" {
		return ""
	}
	if strings.Contains(m, ",") || len(plain) <= 3 || (len(plain) == 4 && plain[0] != '0') {
		if len(plain) > 9 {
			return digits(plain)
		}
		n := atoi(plain)
		if !strings.Contains(m, ",") && len(plain) == 4 && n >= 1100 && n <= 2099 && n%100 != 0 && (n < 2000 || n >= 2010) {
			return Cardinal(n/100) + " " + pairTail(n%100)
		}
		if !strings.Contains(m, ",") && len(plain) == 4 && n >= 1100 && n < 2000 && n%100 == 0 {
			return Cardinal(n/100) + " hundred"
		}
		if plain[0] == '0' && len(plain) > 1 {
			return digits(plain)
		}
		return Cardinal(n)
	}
	return digits(plain)
}

func pairTail(n int) string {
	if n < 10 {
		return "oh " + Cardinal(n)
	}
	return Cardinal(n)
}

func digits(s string) string {
	var b []string
	for _, r := range s {
		if r >= '0' && r <= '9' {
			b = append(b, ones[r-'0'])
		}
	}
	return strings.Join(b, " ")
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

var (
	ones = []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
		"ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"}
	tens = []string{"", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"}
)

// Cardinal spells a non-negative integer below one billion in words
// ("one hundred twenty three").
func Cardinal(n int) string {
	switch {
	case n < 0:
		return "minus " + Cardinal(-n)
	case n < 20:
		return ones[n]
	case n < 100:
		if n%10 == 0 {
			return tens[n/10]
		}
		return tens[n/10] + " " + ones[n%10]
	case n < 1000:
		return join(ones[n/100]+" hundred", n%100)
	case n < 1_000_000:
		return join(Cardinal(n/1000)+" thousand", n%1000)
	case n < 1_000_000_000:
		return join(Cardinal(n/1_000_000)+" million", n%1_000_000)
	}
	return digits(strconv.Itoa(n))
}

func join(head string, rest int) string {
	if rest == 0 {
		return head
	}
	return head + " " + Cardinal(rest)
}

var ordinalWords = map[string]string{
	"one": "first", "two": "second", "three": "third", "five": "fifth", "eight": "eighth",
	"nine": "ninth", "twelve": "twelfth",
}

// Ordinal spells n as an ordinal ("twenty first").
func Ordinal(n int) string {
	c := Cardinal(n)
	i := strings.LastIndexByte(c, ' ')
	head, last := "", c
	if i >= 0 {
		head, last = c[:i+1], c[i+1:]
	}
	if o, ok := ordinalWords[last]; ok {
		return head + o
	}
	if strings.HasSuffix(last, "y") {
		return head + strings.TrimSuffix(last, "y") + "ieth"
	}
	return head + last + "th"
}

// fillers are hesitations, which word error rate does not score (as
// NIST's scoring treats them): a transcript with or without them is as
// good.
var fillers = map[string]bool{"um": true, "uh": true, "er": true, "erm": true, "hmm": true, "mm": true, "ah": true}

// Scored is text as word error rate compares it: Normalize's words
// without fillers.
func Scored(text string) string {
	ws := strings.Fields(Normalize(text))
	return strings.Join(slices.DeleteFunc(ws, func(w string) bool { return fillers[w] }), " ")
}
