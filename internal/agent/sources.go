package agent

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/pkg/maintenance"
	"github.com/sluice-dev/sluice/pkg/maintenance/aws"
	"github.com/sluice-dev/sluice/pkg/maintenance/azure"
	"github.com/sluice-dev/sluice/pkg/maintenance/gcp"
)

// CloudOf names the cloud behind a node's providerID.
func CloudOf(providerID string) (maintenance.Source, error) {
	scheme, _, _ := strings.Cut(providerID, "://")
	switch strings.ToLower(scheme) {
	case "azure":
		return maintenance.SourceAzure, nil
	case "aws":
		return maintenance.SourceAWS, nil
	case "gce":
		return maintenance.SourceGCP, nil
	}
	return "", fmt.Errorf("providerID %q names no cloud sluice knows (azure, aws, gce); set --cloud", providerID)
}

// NewWatcher builds the metadata watcher for the node's cloud. endpoint
// overrides the cloud's metadata address (empty: the real one).
func NewWatcher(cloud maintenance.Source, endpoint, providerID string, clk clock.Clock, interval, timeout time.Duration) (maintenance.Watcher, error) {
	switch cloud {
	case maintenance.SourceAzure:
		vm, err := azure.VMName(providerID)
		if err != nil {
			return nil, err
		}
		c, err := azure.NewClient(endpoint, timeout)
		if err != nil {
			return nil, err
		}
		return azure.NewSource(c, vm, clk, interval), nil
	case maintenance.SourceAWS:
		c, err := aws.NewClient(endpoint, timeout, clk)
		if err != nil {
			return nil, err
		}
		return aws.NewSource(c, clk, interval), nil
	case maintenance.SourceGCP:
		c, err := gcp.NewClient(endpoint, timeout)
		if err != nil {
			return nil, err
		}
		return gcp.NewSource(c, clk), nil
	}
	return nil, fmt.Errorf("--cloud %q: use azure, aws, gcp or auto", cloud)
}
