package alerts

import "testing"

func TestEndpoint(t *testing.T) {
	for raw, want := range map[string]string{
		"http://prometheus:9090":                "http://prometheus:9090/api/v1/alerts",
		"http://prometheus:9090/":               "http://prometheus:9090/api/v1/alerts",
		"https://example.com/prometheus":        "https://example.com/prometheus/api/v1/alerts",
		"https://example.com/prometheus/":       "https://example.com/prometheus/api/v1/alerts",
		"HTTP://Prometheus:9090":                "http://Prometheus:9090/api/v1/alerts",
		"http://[::1]:9090/a%20b":               "http://[::1]:9090/a%20b/api/v1/alerts",
		"http://prometheus.monitoring.svc:9090": "http://prometheus.monitoring.svc:9090/api/v1/alerts",
	} {
		got, err := endpoint(raw)
		if err != nil || got != want {
			t.Errorf("endpoint(%q) = %q, %v; want %q", raw, got, err, want)
		}
	}
}

func TestDefaultClientTimesOut(t *testing.T) {
	if got := (&Checker{}).client().Timeout; got != DefaultTimeout || DefaultTimeout.Seconds() != 10 {
		t.Errorf("default client timeout %v, want 10s", got)
	}
}
