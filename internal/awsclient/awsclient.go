// Package awsclient makes the AWS SDK configuration every AWS client of a
// controller shares: the SDK's default chain, and one retry budget for the
// account and region.
package awsclient

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
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
// region is used when the chain names none, and the instance's metadata when
// neither does. No credential is ever logged.
func Load(ctx context.Context, region string) (aws.Config, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return aws.Config{}, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = region
	}
	if cfg.Region == "" {
		cfg.Region = imdsRegion(ctx, cfg)
	}
	return Share(cfg, DefaultRetryTokens), nil
}

// imdsTimeout bounds the question to the instance metadata service, which
// off EC2 (or with a hop limit of 1 from a pod) never answers.
const imdsTimeout = 3 * time.Second

// imdsRegion is the region of the EC2 instance the process runs on, from its
// metadata (IMDSv2: a session token first, then the instance identity
// document, as the SDK's imds client reads it), or "" when there is none. The SDK's
// own settings for it apply (AWS_EC2_METADATA_DISABLED,
// AWS_EC2_METADATA_SERVICE_ENDPOINT).
func imdsRegion(ctx context.Context, cfg aws.Config) string {
	ctx, cancel := context.WithTimeout(ctx, imdsTimeout)
	defer cancel()
	out, err := imds.NewFromConfig(cfg).GetRegion(ctx, &imds.GetRegionInput{})
	if err != nil {
		return ""
	}
	return out.Region
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
