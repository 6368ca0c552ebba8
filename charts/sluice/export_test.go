package chart

// The external tests (package chart_test, which may import the controller's
// packages: they import this one) use the same Helm helpers.
var (
	Helm    = helm
	Objects = objects
	At      = at
)
