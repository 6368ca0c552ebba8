package chart

// The external tests (package chart_test, which may import the controller's
// packages: they import this one) use the same Helm helpers.
var (
	Helm     = helm
	HelmWith = helmWith
	Helms    = helms
	Objects  = objects
	At       = at
)
