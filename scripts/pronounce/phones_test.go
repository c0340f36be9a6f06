package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestToCMU(t *testing.T) {
	tests := []struct{ in, want string }{
		{"h'Udi", "HH UH D IY"},            // hoodie
		{"'i@3bVdz", "IH R B AH D Z"},      // earbuds
		{"d'u:veI", "D UW V EY"},           // duvet
		{"tS'3:tS", "CH ER CH"},            // church
		{"l'It#@L", "L IH T AH L"},         // little
		{"f'aI3", "F AY ER"},               // fire
		{"dZ'i:m'eIl", "JH IY M EY L"},     // gmail
		{"a#b'aUt", "AH B AW T"},           // about
		{"v'IZ@n", "V IH ZH AH N"},         // vision
		{"n'O@T", "N AO R TH"},             // north
		{"d,i:;,Emv'i:", "D IY EH M V IY"}, // dmv: a spelled word's letters are parted by ';'
	}
	for _, tt := range tests {
		got, err := ToCMU(tt.in)
		require.NoError(t, err, tt.in)
		require.Equal(t, tt.want, got, tt.in)
	}
	_, err := ToCMU("h'U$di")
	require.Error(t, err)
	_, err = ToCMU("'")
	require.Error(t, err)
}
