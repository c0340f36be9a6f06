package deadline

// Percentile99 and Rank99 export percentile99 and rank99 to the
// package's external tests.
var (
	Percentile99 = percentile99
	Rank99       = rank99
)
