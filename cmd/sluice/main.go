// Command sluice drains Kubernetes nodes safely, within the cloud's deadline,
// and explains every blocker. See the README.
package main

import (
	"os"
	// NodePool budget windows are read in their IANA time zone; the image
	// may carry no zone database, so the binary carries its own.
	_ "time/tzdata"

	"github.com/sluice-dev/sluice/internal/cli"
)

func main() {
	os.Exit(cli.Execute())
}
