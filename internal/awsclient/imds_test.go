package awsclient_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/sluice-dev/sluice/internal/awsclient"
)

// imdsV2 answers as the instance metadata service does with IMDSv2
// required (EC2 User Guide, "Use the Instance Metadata Service to access
// instance metadata"): PUT /latest/api/token with
// X-aws-ec2-metadata-token-ttl-seconds gives a token; a GET without a valid
// X-aws-ec2-metadata-token is 401 Unauthorized; the region is in the
// instance identity document (/latest/dynamic/instance-identity/document).
type imdsV2 struct {
	region       string
	tokens, gets atomic.Int32
	unauthorized atomic.Int32
}

func (s *imdsV2) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	const token = "AQAEAFTuPYYFRK1J2Mrtf"
	switch {
	case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token":
		if r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds") == "" {
			http.Error(w, "", http.StatusBadRequest)
			return
		}
		s.tokens.Add(1)
		w.Header().Set("X-aws-ec2-metadata-token-ttl-seconds", r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds"))
		_, _ = w.Write([]byte(token))
	case r.Method == http.MethodGet && r.Header.Get("X-aws-ec2-metadata-token") != token:
		s.unauthorized.Add(1)
		http.Error(w, "", http.StatusUnauthorized)
	case r.Method == http.MethodGet && r.URL.Path == "/latest/dynamic/instance-identity/document" && s.region != "":
		s.gets.Add(1)
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(`{"accountId":"123456789012","architecture":"x86_64","availabilityZone":"` + s.region + `a",` +
			`"imageId":"ami-0abc1234def567890","instanceId":"i-0abc123def4567890","instanceType":"m5.large","privateIp":"10.0.0.1",` +
			`"region":"` + s.region + `","version":"2017-09-30"}`))
	default:
		http.NotFound(w, r)
	}
}

// noRegion leaves the SDK's chain without a region (no environment, no
// profile) and points its metadata client at srv.
func noRegion(t *testing.T, srv string) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "")
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", srv)
}

// With no region in the environment or a profile, the region is the
// instance's, read with an IMDSv2 session token.
func TestLoadTakesTheRegionFromIMDSv2(t *testing.T) {
	srv := &imdsV2{region: "eu-west-3"}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	noRegion(t, ts.URL)
	cfg, err := awsclient.Load(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Region != "eu-west-3" || srv.tokens.Load() == 0 || srv.gets.Load() != 1 {
		t.Errorf("region %q after %d tokens and %d reads; want eu-west-3, read once with a token", cfg.Region, srv.tokens.Load(), srv.gets.Load())
	}

	// A region the caller names comes before the metadata's.
	if cfg, err = awsclient.Load(context.Background(), "us-west-2"); err != nil || cfg.Region != "us-west-2" {
		t.Errorf("Load with a fallback: region %q, %v; want us-west-2", cfg.Region, err)
	}
}

// Off EC2 (the metadata answers nothing) the region stays empty, for the
// caller's clear error.
func TestLoadWithoutAnyRegion(t *testing.T) {
	srv := &imdsV2{}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	noRegion(t, ts.URL)
	cfg, err := awsclient.Load(context.Background(), "")
	if err != nil || cfg.Region != "" {
		t.Errorf("Load = region %q, %v; want no region", cfg.Region, err)
	}
}
