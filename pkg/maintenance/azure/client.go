// Package azure reads Azure Scheduled Events from the instance metadata
// service, approves them, and maps them onto maintenance.Event. Server is an
// in-tree emulator that behaves as Microsoft documents the service, for tests
// and the sandbox.
package azure

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// The service's fixed coordinates.
const (
	DefaultEndpoint = "http://169.254.169.254"
	Path            = "/metadata/scheduledevents"
	APIVersion      = "2020-07-01"
	// MaxDocument bounds a response; anything larger is refused, not parsed.
	MaxDocument = 1 << 20
)

// Document is the service's answer, field for field.
type Document struct {
	DocumentIncarnation int        `json:"DocumentIncarnation"`
	Events              []RawEvent `json:"Events"`
}

// RawEvent is one event as the service sends it.
type RawEvent struct {
	EventID           string   `json:"EventId"`
	EventType         string   `json:"EventType"`
	ResourceType      string   `json:"ResourceType"`
	Resources         []string `json:"Resources"`
	EventStatus       string   `json:"EventStatus"`
	NotBefore         string   `json:"NotBefore"` // RFC 1123, GMT; empty once Started
	Description       string   `json:"Description"`
	EventSource       string   `json:"EventSource"` // Platform or User
	DurationInSeconds int      `json:"DurationInSeconds"`
}

// Client talks to one metadata endpoint.
type Client struct {
	base    string
	http    *http.Client
	retries int
}

// NewClient returns a client for endpoint (DefaultEndpoint when empty); every
// request is bounded by timeout.
func NewClient(endpoint string, timeout time.Duration) (*Client, error) {
	if endpoint == "" {
		endpoint = DefaultEndpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--imds-endpoint %q: give a URL such as http://169.254.169.254", endpoint)
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("metadata timeout %s: must be positive", timeout)
	}
	return &Client{base: strings.TrimRight(endpoint, "/") + Path + "?api-version=" + APIVersion, http: maintenance.NewHTTPClient(timeout, timeout), retries: 3}, nil
}

// Document fetches the current document, retrying transport errors and 5xx
// answers with backoff. A malformed or oversized answer is an error.
func (c *Client) Document(ctx context.Context) (*Document, error) {
	var doc Document
	err := c.do(ctx, http.MethodGet, nil, func(body []byte) error {
		if err := json.Unmarshal(body, &doc); err != nil {
			return fmt.Errorf("decoding scheduled events: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &doc, nil
}

// Approve asks the platform to start the events now (StartRequests).
func (c *Client) Approve(ctx context.Context, ids ...string) error {
	type start struct {
		EventID string `json:"EventId"`
	}
	req := struct {
		StartRequests []start `json:"StartRequests"`
	}{}
	for _, id := range ids {
		req.StartRequests = append(req.StartRequests, start{EventID: id})
	}
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encoding approval: %w", err)
	}
	return c.do(ctx, http.MethodPost, body, func([]byte) error { return nil })
}

func (c *Client) do(ctx context.Context, method string, body []byte, handle func([]byte) error) error {
	backoff := 200 * time.Millisecond
	var last error
	for attempt := 0; attempt <= c.retries; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(backoff):
			}
			backoff *= 2
		}
		req, err := http.NewRequestWithContext(ctx, method, c.base, bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("building request: %w", err)
		}
		req.Header.Set("Metadata", "true")
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := c.http.Do(req)
		if err != nil {
			last = fmt.Errorf("%s scheduled events: %w", strings.ToLower(method), err)
			continue
		}
		data, err := io.ReadAll(io.LimitReader(resp.Body, MaxDocument+1))
		_ = resp.Body.Close()
		switch {
		case err != nil:
			last = fmt.Errorf("reading scheduled events: %w", err)
			continue
		case len(data) > MaxDocument:
			return fmt.Errorf("scheduled events answer is larger than %d bytes; refusing it", MaxDocument)
		case resp.StatusCode >= 500:
			last = fmt.Errorf("scheduled events: %s", resp.Status)
			continue
		case resp.StatusCode != http.StatusOK:
			return fmt.Errorf("scheduled events: %s: %s", resp.Status, strings.TrimSpace(string(data[:min(len(data), 200)])))
		}
		return handle(data)
	}
	return last
}

// EventsFor maps the document's events that name vm onto maintenance.Event.
// Events it cannot read are left out and returned as errors, so one bad event
// never hides the good ones and never causes an action.
func (d *Document) EventsFor(vm string) ([]maintenance.Event, []error) {
	var out []maintenance.Event
	var errs []error
	for _, raw := range d.Events {
		if !names(raw.Resources, vm) {
			continue
		}
		e, err := raw.normalize()
		if err != nil {
			errs = append(errs, fmt.Errorf("event %q: %w", raw.EventID, err))
			continue
		}
		out = append(out, e)
	}
	return out, errs
}

func (r RawEvent) normalize() (maintenance.Event, error) {
	e := maintenance.Event{ID: r.EventID, Source: maintenance.SourceAzure, Description: r.Description, Resources: r.Resources}
	if r.EventID == "" {
		return e, errors.New("no EventId")
	}
	switch t := maintenance.Type(r.EventType); t {
	case maintenance.TypeFreeze, maintenance.TypeReboot, maintenance.TypeRedeploy, maintenance.TypePreempt, maintenance.TypeTerminate:
		e.Type = t
	default:
		return e, fmt.Errorf("unknown EventType %q", r.EventType)
	}
	switch s := maintenance.Status(r.EventStatus); s {
	case maintenance.StatusScheduled, maintenance.StatusStarted:
		e.Status = s
	default:
		return e, fmt.Errorf("unknown EventStatus %q", r.EventStatus)
	}
	if r.NotBefore != "" {
		t, err := time.Parse(time.RFC1123, r.NotBefore)
		if err != nil {
			return e, fmt.Errorf("NotBefore %q is not RFC 1123", r.NotBefore)
		}
		e.NotBefore = t.UTC()
		e.Deadline = e.NotBefore
	}
	if r.DurationInSeconds > 0 {
		e.Duration = time.Duration(r.DurationInSeconds) * time.Second
	}
	return e, nil
}

func names(resources []string, vm string) bool {
	for _, r := range resources {
		if strings.EqualFold(r, vm) {
			return true
		}
	}
	return false
}

var (
	vmssInstance = regexp.MustCompile(`(?i)/virtualMachineScaleSets/([^/]+)/virtualMachines/([^/]+)$`)
	plainVM      = regexp.MustCompile(`(?i)/virtualMachines/([^/]+)$`)
)

// VMName is the name Scheduled Events uses for the machine behind a node's
// providerID: "<vmss>_<instance>" for a scale-set instance, the VM's name
// otherwise.
func VMName(providerID string) (string, error) {
	if !strings.HasPrefix(strings.ToLower(providerID), "azure://") {
		return "", fmt.Errorf("providerID %q is not an Azure one", providerID)
	}
	if m := vmssInstance.FindStringSubmatch(providerID); m != nil {
		return m[1] + "_" + m[2], nil
	}
	if m := plainVM.FindStringSubmatch(providerID); m != nil {
		return m[1], nil
	}
	return "", fmt.Errorf("providerID %q names no virtual machine", providerID)
}
