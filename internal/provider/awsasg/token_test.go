package awsasg_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/internal/provider/awsasg"
)

// EC2 takes a ClientToken of at most 64 ASCII characters (RunInstances, API
// reference: "Constraints: Maximum 64 ASCII characters"); moto 5.2.1 takes
// any length, so the tokens sent are read on the way. A machine of a pool
// with a long name gets a token of 64, its own: two names alike in their
// first 64 characters get two tokens, and a name that fits is its own token.
func TestClientTokensFitEC2sLimit(t *testing.T) {
	m, _, np := oneGroup(t)
	ec := &recordingRun{EC2: m.EC2}
	p := awsasg.New(ec, m.ASG, clocktesting.NewFakeClock(time.Now()))
	long := strings.Repeat("checkout-frontend-", 4) + np.Name // 72 characters and more
	names := []string{long + "-abcde", long + "-abcdf", np.Name + "-short"}
	for _, n := range names {
		if _, err := p.Create(context.Background(), np, n); err != nil {
			t.Fatal(err)
		}
	}
	tokens := ec.tokens()
	if len(tokens) != 3 {
		t.Fatalf("%d launches; want 3", len(tokens))
	}
	for i, tok := range tokens[:2] {
		if len(tok) != 64 || !strings.HasPrefix(tok, long[:40]) {
			t.Errorf("token %q for %s; want 64 characters beginning with the name", tok, names[i])
		}
	}
	if tokens[0] == tokens[1] {
		t.Errorf("two machines got the token %q", tokens[0])
	}
	if tokens[2] != names[2] {
		t.Errorf("token %q for %s; want the name itself", tokens[2], names[2])
	}
}

// recordingRun notes the ClientToken of every RunInstances.
type recordingRun struct {
	awsasg.EC2
	mu   sync.Mutex
	seen []string
}

func (r *recordingRun) RunInstances(ctx context.Context, in *ec2.RunInstancesInput, opts ...func(*ec2.Options)) (*ec2.RunInstancesOutput, error) {
	r.mu.Lock()
	r.seen = append(r.seen, aws.ToString(in.ClientToken))
	r.mu.Unlock()
	return r.EC2.RunInstances(ctx, in, opts...)
}

func (r *recordingRun) tokens() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}
