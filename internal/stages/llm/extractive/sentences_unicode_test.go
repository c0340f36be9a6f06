package extractive_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/stages/llm/extractive"
)

// A sentence ends before an upper-case letter, whatever its encoding: a
// lower-case letter of more than one byte ("é", "ж") does not start one,
// as its first byte read as a Latin-1 letter ("Ã", "Ð") once made it.
func TestSentencesNonASCII(t *testing.T) {
	tests := []struct {
		text string
		want []string
	}{
		{"Pay by card, e.g. über or Visa.", []string{"Pay by card, e.g. über or Visa."}},
		{"Ask for approx. één week.", []string{"Ask for approx. één week."}},
		{"Call us at the Kyiv office, i.e. ж desk.", []string{"Call us at the Kyiv office, i.e. ж desk."}},
		{"We ship to Germany. Überall is fine.", []string{"We ship to Germany.", "Überall is fine."}},
		{"Open daily. Ésta es la tienda.", []string{"Open daily.", "Ésta es la tienda."}},
		{"Ask us. Это магазин.", []string{"Ask us.", "Это магазин."}},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			require.Equal(t, tt.want, extractive.Sentences(tt.text))
		})
	}
}
