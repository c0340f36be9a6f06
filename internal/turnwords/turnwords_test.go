package turnwords

import "testing"

func TestUnfinished(t *testing.T) {
	for _, tt := range []struct {
		text string
		want bool
	}{
		{"", false},
		{"   ", false},
		{"i want to return the", true},
		{"my order number is um", true},
		{"my order number is uh", true},
		{"i want to", true},
		{"where is my order", false},
		{"i want to return the blue lamp i bought last week", false},
		{"can you send it to my", true},
		{"the courier came and", true},
		{"THE", true},
		{"is it done.", false},
		{"i was going to, ", true}, // punctuation a remote recogniser may add
		{"where is it", false},
		{"log in", false},
		{"there", false}, // a word that merely starts like one
		{"theory", false},
		{"order", false},
		{"what time does they", true}, // the recogniser's "the" before a pause
		{"can", true},
		{"i'm", true},
		{"can you see where my towels are", false},
		{"thank you", false},
		{"how do i log in", false},
		{"what should i do", false},
		{"can you help me", false},
	} {
		if got := Unfinished(tt.text); got != tt.want {
			t.Errorf("Unfinished(%q) = %v, want %v", tt.text, got, tt.want)
		}
	}
}
