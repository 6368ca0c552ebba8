package awsclient_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/sluice-dev/sluice/internal/awsclient"
)

// throttled answers every request as a throttled EC2 or Auto Scaling does
// (the Query protocol's XML errors) and counts them by action.
type throttled struct {
	mu    sync.Mutex
	count map[string]int
}

func (s *throttled) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	form, _ := url.ParseQuery(string(body))
	action := form.Get("Action")
	s.mu.Lock()
	s.count[action]++
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/xml")
	if action == "DescribeInstances" {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>Request limit exceeded.</Message></Error></Errors><RequestID>r</RequestID></Response>`)
		return
	}
	w.WriteHeader(http.StatusBadRequest)
	_, _ = io.WriteString(w, `<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message></Error><RequestId>r</RequestId></ErrorResponse>`)
}

func (s *throttled) n(action string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count[action]
}

// Once EC2's throttling has spent the shared budget, Auto Scaling's next
// throttled call is not retried at all; with a budget per client (the SDK's
// default) it is.
func TestOneRetryBudgetForEveryClient(t *testing.T) {
	for _, shared := range []bool{true, false} {
		srv := &throttled{count: map[string]int{}}
		ts := httptest.NewServer(srv)
		cfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(ts.URL),
			Credentials: credentials.NewStaticCredentialsProvider("testing", "testing", "")}
		if shared {
			cfg = awsclient.Share(cfg, 10) // two throttling retries
		}
		ec2c, asg := ec2.NewFromConfig(cfg), autoscaling.NewFromConfig(cfg)
		ctx := context.Background()
		for range 3 {
			_, _ = ec2c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
		}
		_, err := asg.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{})
		ts.Close()
		if err == nil {
			t.Fatal("a throttled call succeeded")
		}
		got := srv.n("DescribeAutoScalingGroups")
		if shared && got != 1 {
			t.Errorf("shared budget: Auto Scaling was asked %d times after EC2 spent the budget, want 1 (no retry)", got)
		}
		if !shared && got < 2 {
			t.Errorf("a budget per client: Auto Scaling was asked %d times, want its own retries", got)
		}
		t.Logf("shared %t: EC2 %d requests, Auto Scaling %d", shared, srv.n("DescribeInstances"), got)
	}
}
