package loadgen

import (
	"encoding/json"
	"math"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
)

// hist builds a histogram with buckets of upper bounds 1, 5 and 10 ms,
// their cumulative counts and then the total count.
func hist(counts ...uint64) *dto.Histogram {
	h := &dto.Histogram{SampleCount: proto.Uint64(counts[3])}
	for i, ub := range []float64{.001, .005, .01} {
		h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: proto.Float64(ub), CumulativeCount: proto.Uint64(counts[i])})
	}
	return h
}

func TestBound(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		name        string
		first, last *dto.Histogram
		want        *Bound
	}{
		{"no histogram", nil, hist(1, 1, 1, 1), nil},
		{"nothing during the run", hist(5, 5, 5, 5), hist(5, 5, 5, 5), nil},
		{"all within the first bucket", hist(0, 0, 0, 0), hist(100, 100, 100, 100), &Bound{100, 1, 1}},
		// 99 of 100 within 1 ms, the slowest within 10 ms.
		{"p99 and max apart", hist(0, 0, 0, 0), hist(99, 99, 100, 100), &Bound{100, 1, 10}},
		// Only what happened between the scrapes counts: the earlier slow
		// observations are subtracted.
		{"earlier observations subtracted", hist(0, 0, 50, 50), hist(200, 200, 250, 250), &Bound{200, 1, 1}},
		// 2 of 100 past the last bucket: p99 and max are unbounded.
		{"beyond the last bucket", hist(0, 0, 0, 0), hist(90, 95, 98, 100), &Bound{100, inf, inf}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, bound(tc.first, tc.last))
		})
	}
}

// A bound past the last bucket is +Inf, which encoding/json refuses; the
// report (-json) must still be written, with null for it.
func TestBoundJSON(t *testing.T) {
	for _, tc := range []struct {
		b    Bound
		want string
	}{
		{Bound{100, 1, 10}, `{"count":100,"p99AtMostMs":1,"maxAtMostMs":10}`},
		{Bound{100, 1, math.Inf(1)}, `{"count":100,"p99AtMostMs":1,"maxAtMostMs":null}`},
		{Bound{100, math.Inf(1), math.Inf(1)}, `{"count":100,"p99AtMostMs":null,"maxAtMostMs":null}`},
	} {
		got, err := json.Marshal(struct{ B *Bound }{&tc.b})
		require.NoError(t, err)
		require.JSONEq(t, `{"B":`+tc.want+`}`, string(got))
	}
}
