// Package awsclient makes the AWS SDK configuration every AWS client of a
// controller shares: the SDK's default chain, and one retry budget for the
// account and region.
package awsclient

import (
	"context"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
)

// DefaultRetryTokens is the retry budget's size, the SDK's own default for
// one client: a retry after throttling costs 5 tokens, after a timeout 10,
// and each first-attempt success gives one back.
const DefaultRetryTokens = 500

// Share gives every client made from the returned configuration (EC2, Auto
// Scaling, SQS) one retryer, so they draw on one token bucket: when the
// account and region are throttled, a storm of retries from one API does
// not go on through another (the SDK's default is a bucket per client).
// Backoff with jitter, the SDK's retryable codes, AWS_RETRY_MODE=adaptive
// and AWS_MAX_ATTEMPTS are as the SDK has them.
func Share(cfg aws.Config, tokens uint) aws.Config {
	bucket := ratelimit.NewTokenRateLimit(tokens)
	standard := func(o *retry.StandardOptions) {
		o.RateLimiter = bucket
		if cfg.RetryMaxAttempts > 0 { // AWS_MAX_ATTEMPTS, as the SDK reads it
			o.MaxAttempts = cfg.RetryMaxAttempts
		}
	}
	var shared aws.Retryer = retry.NewStandard(standard)
	if cfg.RetryMode == aws.RetryModeAdaptive { // AWS_RETRY_MODE=adaptive
		shared = retry.NewAdaptiveMode(func(o *retry.AdaptiveModeOptions) { o.StandardOptions = append(o.StandardOptions, standard) })
	}
	cfg.Retryer = func() aws.Retryer { return shared }
	return cfg
}

// Load is the SDK's default chain (IRSA or EKS Pod Identity in a cluster;
// the environment or a profile outside one) with one shared retry budget;
// region is used when the chain names none. No credential is ever logged.
func Load(ctx context.Context, region string) (aws.Config, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return aws.Config{}, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = region
	}
	return Share(cfg, DefaultRetryTokens), nil
}

// Process is the one AWS configuration of the process: the first call loads
// it (Load, with region as its fallback) and every later one shares it, so
// the queue reader's and the aws-asg provider's clients draw on one retry
// budget.
var Process = func() func(context.Context, string) (aws.Config, error) {
	var (
		once sync.Once
		cfg  aws.Config
		err  error
	)
	return func(ctx context.Context, region string) (aws.Config, error) {
		once.Do(func() { cfg, err = Load(ctx, region) })
		return cfg, err
	}
}()
