// Command sluice drains Kubernetes nodes safely, within the cloud's deadline,
// and explains every blocker. See the README.
package main

import (
	"os"
	// NodePool budget windows are read in their IANA time zone; the image
	// may carry no zone database, so the binary carries its own.
	_ "time/tzdata"

	// The image has no CA bundle either: the cloud APIs' TLS is checked
	// against Mozilla's roots compiled in (used only when the system has none).
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/sluice-dev/sluice/internal/cli"
)

func main() {
	os.Exit(cli.Execute())
}
