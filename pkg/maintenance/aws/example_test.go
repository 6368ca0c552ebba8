package aws_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/pkg/maintenance/aws"
)

// A Spot interruption notice, read through the emulator as sluice's agent
// reads the real service.
func ExampleSource() {
	clk := clocktesting.NewFakeClock(time.Date(2017, 9, 18, 8, 20, 0, 0, time.UTC))
	imds := aws.NewServer(clk)
	ts := httptest.NewServer(imds)
	defer ts.Close()
	imds.Spot(aws.SpotTerminate, clk.Now().Add(2*time.Minute))

	client, err := aws.NewClient(ts.URL, 2*time.Second, clk)
	if err != nil {
		fmt.Println(err)
		return
	}
	obs, err := aws.NewSource(client, clk, aws.DefaultPollInterval).Next(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, e := range obs.Events {
		fmt.Println(e.ID, e.Type, e.Deadline.Format(time.RFC3339))
	}
	// Output: spot-terminate-20170918T082200Z Preempt 2017-09-18T08:22:00Z
}
