package alerts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

const (
	// DefaultTimeout bounds one question to Prometheus when the Checker has
	// no Client of its own.
	DefaultTimeout = 10 * time.Second

	// MaxResponseBytes is the largest answer Blocking reads. A larger one is
	// refused rather than cut short: a truncated list could hide an alert.
	MaxResponseBytes = 4 << 20

	// MissingAlertName stands for an alert that has no alertname label. It
	// cannot be a real alertname: Prometheus requires a rule's alert name to
	// be a valid metric name, which has no '<' or spaces.
	MissingAlertName = "<alert without alertname>"
)

// Checker asks one Prometheus which of its active alerts hold a reboot.
// It is safe for concurrent use once built; Validate says whether it can ask.
type Checker struct {
	// URL is the Prometheus base URL, as kured's --prometheus-url:
	// absolute http or https, optionally with a path prefix
	// (--web.route-prefix), no credentials, query or fragment.
	URL string
	// Filter, as kured's --alert-filter-regexp, names alerts by alertname;
	// unanchored (write ^Name$ for one name). Nil is no filter: every alert
	// blocks whatever MatchOnly says, as in kured with the flag unset.
	Filter *regexp.Regexp
	// MatchOnly, as kured's --alert-filter-match-only, inverts Filter: only
	// the alertnames it matches block, instead of all but those.
	MatchOnly bool
	// FiringOnly, as kured's --alert-firing-only, lets pending alerts pass:
	// only firing ones block.
	FiringOnly bool
	// Client asks Prometheus; nil means a client that gives up after
	// DefaultTimeout.
	Client *http.Client
}

// Validate says why the Checker cannot ask Prometheus, or nil if it can.
func (c *Checker) Validate() error {
	_, err := endpoint(c.URL)
	return err
}

// Blocking returns the sorted, distinct alertnames of the alerts that hold a
// reboot now: firing ones, pending ones too unless FiringOnly, then Filter
// and MatchOnly as kured applies them. An alert without an alertname is
// listed as MissingAlertName whatever Filter says, since Filter cannot judge
// it.
//
// Fail closed: a nil error means Prometheus answered in full and the list is
// complete, so an empty list means nothing blocks. Any error (an invalid
// URL, no answer within ctx or the client's timeout, a non-2xx status, an
// error envelope, an answer that is not the documented shape or is larger
// than MaxResponseBytes) means sluice does not know, and the caller must
// hold the reboot.
func (c *Checker) Blocking(ctx context.Context) ([]string, error) {
	u, err := endpoint(c.URL)
	if err != nil {
		return nil, err
	}
	body, err := c.get(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("asking Prometheus for alerts at %s: %w", u, err)
	}
	names, err := c.blocking(body)
	if err != nil {
		return nil, fmt.Errorf("reading Prometheus alerts from %s: %w", u, err)
	}
	return names, nil
}

// alert is one element of data.alerts; see
// https://prometheus.io/docs/prometheus/latest/querying/api/#alerts.
// Annotations, activeAt, keepFiringSince and value do not decide anything.
type alert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

// envelope is Prometheus's response envelope; see
// https://prometheus.io/docs/prometheus/latest/querying/api/#format-overview.
type envelope struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      *struct {
		Alerts *[]alert `json:"alerts"`
	} `json:"data"`
}

// defaultClient serves every Checker without a Client, so they share its
// connections.
var defaultClient = &http.Client{Timeout: DefaultTimeout}

func (c *Checker) client() *http.Client {
	if c.Client != nil {
		return c.Client
	}
	return defaultClient
}

// get returns the body of a 2xx answer to GET u.
func (c *Checker) get(ctx context.Context, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.client().Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the answer (HTTP %d): %w", resp.StatusCode, err)
	}
	if len(body) > MaxResponseBytes {
		return nil, fmt.Errorf("HTTP %d answer is larger than %d bytes; refusing to judge alerts from part of it",
			resp.StatusCode, MaxResponseBytes)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, statusError(resp.StatusCode, body)
	}
	return body, nil
}

// statusError describes a non-2xx answer by Prometheus's error envelope when
// it sent one, else by the start of the body.
func statusError(code int, body []byte) error {
	var env envelope
	if json.Unmarshal(body, &env) == nil && env.Status == "error" {
		return fmt.Errorf("HTTP %d %s: %s: %s", code, http.StatusText(code), env.ErrorType, env.Error)
	}
	return fmt.Errorf("HTTP %d %s: %s", code, http.StatusText(code), excerpt(body))
}

// decode returns data.alerts of a 2xx answer.
func decode(body []byte) ([]alert, error) {
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, fmt.Errorf("not the JSON Prometheus documents (%w): %s", err, excerpt(body))
	}
	switch {
	case env.Status == "error":
		return nil, fmt.Errorf("status error: %s: %s", env.ErrorType, env.Error)
	case env.Status != "success":
		return nil, fmt.Errorf("status %q, want \"success\": %s", env.Status, excerpt(body))
	case env.Data == nil || env.Data.Alerts == nil:
		return nil, fmt.Errorf("no data.alerts list: %s", excerpt(body))
	}
	return *env.Data.Alerts, nil
}

// blocking judges a 2xx answer's alerts.
func (c *Checker) blocking(body []byte) ([]string, error) {
	active, err := decode(body)
	if err != nil {
		return nil, err
	}
	var names []string
	for i, a := range active {
		blocks, err := c.stateBlocks(a.State)
		if err != nil {
			return nil, fmt.Errorf("alert %d (%s): %w", i, nameOf(a), err)
		}
		if !blocks {
			continue
		}
		name, ok := a.Labels["alertname"]
		switch {
		case !ok || name == "":
			names = append(names, MissingAlertName)
		case c.filterPasses(name):
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// stateBlocks reads an alert's state. Prometheus's states are inactive,
// pending and firing; /api/v1/alerts lists only the last two. Any other
// value means the answer is not what Prometheus documents, and guessing
// could let a reboot through.
func (c *Checker) stateBlocks(state string) (bool, error) {
	switch state {
	case "firing":
		return true, nil
	case "pending":
		return !c.FiringOnly, nil
	case "inactive":
		return false, nil
	default:
		return false, fmt.Errorf("state %q is none of firing, pending, inactive", state)
	}
}

// filterPasses is kured's rule: without a filter every alert counts; with
// one, an alert counts when whether it matches equals MatchOnly.
func (c *Checker) filterPasses(name string) bool {
	if c.Filter == nil {
		return true
	}
	return c.Filter.MatchString(name) == c.MatchOnly
}

func nameOf(a alert) string {
	if name := a.Labels["alertname"]; name != "" {
		return name
	}
	return MissingAlertName
}

// endpoint checks a Prometheus base URL and returns its /api/v1/alerts.
func endpoint(raw string) (string, error) {
	if raw == "" {
		return "", errors.New("prometheus URL is empty; give an absolute http or https URL such as http://prometheus.monitoring:9090")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("prometheus URL %q does not parse: %w", raw, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("prometheus URL %q: scheme must be http or https (as in http://prometheus.monitoring:9090), not %q", raw, u.Scheme)
	case u.Host == "":
		return "", fmt.Errorf("prometheus URL %q has no host", raw)
	case u.User != nil:
		// Errors, Events and logs print the URL; a password in it would leak.
		return "", fmt.Errorf("prometheus URL %s carries credentials; sluice does not send them", u.Redacted())
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return "", fmt.Errorf("prometheus URL %q: a base URL has no query or fragment; sluice appends /api/v1/alerts", raw)
	}
	return u.JoinPath("api", "v1", "alerts").String(), nil
}

// excerpt quotes the start of a body for an error message.
func excerpt(body []byte) string {
	const limit = 256
	s := strings.TrimSpace(string(body))
	if s == "" {
		return "empty body"
	}
	if len(s) > limit {
		return fmt.Sprintf("%q (%d bytes)", s[:limit]+"…", len(body))
	}
	return fmt.Sprintf("%q", s)
}
