package main

import "testing"

func TestSplitPoint(t *testing.T) {
	for _, tt := range []struct {
		q    string
		want int // words in the first part; 0: no split
	}{
		{"where is my order", 2},                                 // "where is | my order"
		{"i want to return the table lamp i ordered", 5},         // after "the", nearest the middle
		{"um please cancel my duvet order it hasn't shipped", 4}, // after "my"
		{"cancel order", 0},
		{"refund status please", 0},
		{"the order is late", 0}, // "the" first and "is" with one word after: no split
	} {
		if got := splitPoint(tt.q); got != tt.want {
			t.Errorf("splitPoint(%q) = %d, want %d", tt.q, got, tt.want)
		}
	}
}
