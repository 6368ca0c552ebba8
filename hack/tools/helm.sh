#!/usr/bin/env bash
# Builds Helm at the version pinned in hack/tools/helm/go.mod, for the chart's tests.
# Prints the helm binary's path on stdout (the last line).
exec "$(dirname "${BASH_SOURCE[0]}")/gotool.sh" helm
