// Command sluice drains Kubernetes nodes safely, within the cloud's deadline,
// and explains every blocker. See the README.
package main

import (
	"os"

	"github.com/sluice-dev/sluice/internal/cli"
)

func main() {
	os.Exit(cli.Execute())
}
