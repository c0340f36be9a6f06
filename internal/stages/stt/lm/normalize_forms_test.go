package lm

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A phone number written with dashes is spelled as the same number
// unformatted (digit by digit), never as a range ("one to eight hundred").
func TestPhoneNumbers(t *testing.T) {
	for in, same := range map[string]string{
		"call 1-800-555-0142": "call 18005550142",
		"call 555-0100":       "call 5550100",
		"call (555) 123-4567": "call 5551234567",
	} {
		require.Equal(t, Normalize(same), Normalize(in), in)
		require.NotContains(t, Normalize(in), " to ", in)
	}
	require.Equal(t, "three to five business days", Normalize("3-5 business days"), "a range stays a range")
}

// A range of times is said with "to", as a range of numbers is.
func TestTimeRanges(t *testing.T) {
	require.Equal(t, "open nine a m to five p m", Normalize("open 9am-5pm"))
	require.Equal(t, "open nine a m to five thirty p m", Normalize("open 9am-5:30pm"))
	require.Equal(t, "open nine to five", Normalize("open 9-5"))
}

// Thousands separators in decimals and ordinals, and amounts under a dollar.
func TestNumberForms(t *testing.T) {
	require.Equal(t, "one thousand two hundred thirty four point five", Normalize("1,234.5"))
	require.Equal(t, "the one thousandth order", Normalize("the 1,000th order"))
	require.Equal(t, "only fifty cents", Normalize("only $0.50"))
}

// A minus sign is said.
func TestNegativeNumbers(t *testing.T) {
	require.Equal(t, "it is minus five degrees", Normalize("it is -5°"))
	require.Equal(t, "a change of minus three point five percent", Normalize("a change of -3.5%"))
	require.Equal(t, "three to five", Normalize("3 -5"), "a range is not a negative number")
}

// An ISO date is said as a date, and a round year from 1100 to 1900 in
// hundreds. "2026-12-07" was "twenty twenty six to twelve zero seven"
// (a year, a range and digits), and 1900 "one thousand nine hundred".
func TestDatesAndRoundYears(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"on 2026-12-07.", "on december seventh twenty twenty six"},
		{"2026-01-01", "january first twenty twenty six"},
		{"1999-12-31", "december thirty first nineteen ninety nine"},
		{"2005-03-22", "march twenty second two thousand five"},
		{"1900-06-02", "june second nineteen hundred"},
		{"in 1900", "in nineteen hundred"},
		{"since 1800", "since eighteen hundred"},
		{"1100", "eleven hundred"},
		{"1000", "one thousand"},
		{"2000", "two thousand"},
		{"2100", "two thousand one hundred"},
		{"1,900 stores", "one thousand nine hundred stores"}, // grouped: a quantity
		{"1905", "nineteen oh five"},
	} {
		require.Equal(t, tt.want, Normalize(tt.in), tt.in)
	}
	require.NotContains(t, Normalize("2026-13-07"), "seventh", "no month 13: not a date")
}
