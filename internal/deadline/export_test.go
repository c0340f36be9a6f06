package deadline

// Percentile99 exports percentile99 to the package's external tests.
var Percentile99 = percentile99
