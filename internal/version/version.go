// Package version holds the build's identity, stamped in by the Makefile.
package version

import "runtime"

// Version is sluice's release, set with -ldflags "-X .../internal/version.Version=v1.2.3".
var Version = "dev"

// Commit is the git commit the binary was built from, when known.
var Commit = ""

// Info is what `sluice version` reports.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns the running binary's version information.
func Get() Info {
	return Info{Version: Version, Commit: Commit, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
}
