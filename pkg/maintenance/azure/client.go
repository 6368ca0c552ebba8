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

	// unreadable are the entries of Events that did not decode.
	unreadable []unreadable
}

// RawEvent is one event as the service sends it.
type RawEvent struct {
	EventID      string   `json:"EventId"`
	EventType    string   `json:"EventType"` // Freeze, Reboot, Redeploy, Preempt or Terminate
	ResourceType string   `json:"ResourceType"`
	Resources    []string `json:"Resources"`
	EventStatus  string   `json:"EventStatus"` // Scheduled or Started
	// NotBefore is RFC 1123 in GMT as documented ("Mon, 19 Sep 2016
	// 18:29:47 GMT"), RFC 3339 from Microsoft's mock server and some
	// platform versions, and empty once Started.
	NotBefore   string `json:"NotBefore"`
	Description string `json:"Description"`
	EventSource string `json:"EventSource"` // Platform or User
	// DurationInSeconds is how long the impact lasts: -1 when unknown, and 0
	// is a real value.
	DurationInSeconds int `json:"DurationInSeconds"`
}

// Event sources.
const (
	EventSourcePlatform = "Platform"
	EventSourceUser     = "User"
)

// DurationUnknown is DurationInSeconds when the impact's length is unknown.
const DurationUnknown = -1

// unreadable is an entry of Events that did not decode, with what could be
// told of it.
type unreadable struct {
	index     int
	id        string   // "" when not even EventId could be read
	resources []string // nil when Resources could not be read
	err       error
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
	var doc *Document
	err := c.do(ctx, http.MethodGet, nil, func(body []byte) (err error) {
		doc, err = ParseDocument(body)
		return err
	})
	if err != nil {
		return nil, err
	}
	return doc, nil
}

// ParseDocument reads a Scheduled Events answer. An answer that is not a
// JSON object with a list of Events is an error; each entry of the list is
// decoded on its own, so an entry that does not decode is set aside (and
// reported by EventsFor) instead of spoiling the others.
func ParseDocument(body []byte) (*Document, error) {
	var raw struct {
		DocumentIncarnation int               `json:"DocumentIncarnation"`
		Events              []json.RawMessage `json:"Events"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("decoding scheduled events: %w", err)
	}
	doc := &Document{DocumentIncarnation: raw.DocumentIncarnation}
	for i, entry := range raw.Events {
		var e RawEvent
		if err := json.Unmarshal(entry, &e); err != nil {
			doc.unreadable = append(doc.unreadable, salvage(i, entry, err))
			continue
		}
		doc.Events = append(doc.Events, e)
	}
	return doc, nil
}

// salvage reads what it can of an entry that did not decode: its EventId and
// Resources, when they have the right types.
func salvage(i int, entry json.RawMessage, err error) unreadable {
	u := unreadable{index: i, err: err}
	var fields map[string]json.RawMessage
	if json.Unmarshal(entry, &fields) != nil {
		return u
	}
	_ = json.Unmarshal(fields["EventId"], &u.id)
	if json.Unmarshal(fields["Resources"], &u.resources) != nil {
		u.resources = nil
	}
	return u
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
// An entry it cannot read is left out and returned as a
// maintenance.RejectedError naming the entry, so one bad entry never hides
// the good ones and never causes an action. An entry that did not decode is
// reported unless its Resources show it is for another machine.
func (d *Document) EventsFor(vm string) ([]maintenance.Event, []error) {
	var out []maintenance.Event
	var errs []error
	for _, raw := range d.Events {
		if !names(raw.Resources, vm) {
			continue
		}
		e, err := raw.normalize()
		if err != nil {
			errs = append(errs, maintenance.Reject(part(raw.EventID, -1), err, raw.EventID))
			continue
		}
		out = append(out, e)
	}
	for _, u := range d.unreadable {
		if u.resources != nil && !names(u.resources, vm) {
			continue
		}
		err := fmt.Errorf("decoding: %w", u.err)
		if u.id == "" {
			errs = append(errs, maintenance.Reject(part("", u.index), err))
		} else {
			errs = append(errs, maintenance.Reject(part(u.id, u.index), err, u.id))
		}
	}
	return out, errs
}

// part names an entry: by its EventId, or by its place in the list.
func part(id string, index int) string {
	if id != "" {
		return fmt.Sprintf("event %q", clip(id))
	}
	if index < 0 {
		return "event with no EventId"
	}
	return fmt.Sprintf("event #%d", index)
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
		return e, fmt.Errorf("unknown EventType %q", clip(r.EventType))
	}
	switch s := maintenance.Status(r.EventStatus); s {
	case maintenance.StatusScheduled, maintenance.StatusStarted:
		e.Status = s
	default:
		return e, fmt.Errorf("unknown EventStatus %q", clip(r.EventStatus))
	}
	if r.NotBefore != "" {
		t, err := ParseNotBefore(r.NotBefore)
		if err != nil {
			return e, err
		}
		e.NotBefore, e.Deadline = t, t
	}
	switch r.EventSource {
	case EventSourceUser:
		e.Initiator = maintenance.InitiatorUser
	case EventSourcePlatform:
		e.Initiator = maintenance.InitiatorPlatform
		// Anything else (absent in api-versions before 2020-07-01) says
		// nothing, and is treated as the platform.
	}
	if r.DurationInSeconds >= 0 {
		// -1 is documented as unknown; other negative values mean nothing.
		e.Duration = maintenance.DurationOf(time.Duration(r.DurationInSeconds) * time.Second)
	}
	return e, nil
}

// notBeforeLayouts are the shapes NotBefore comes in: RFC 1123 in GMT, as
// documented (with a one- or two-digit day), in UTC (what Go's own
// time.RFC1123 writes for a UTC time, and what sluice's own emulator and
// tests sent before), or with a numeric offset; and RFC 3339. A zone named
// otherwise (PST) is refused: Go would read it as UTC.
var notBeforeLayouts = []string{"Mon, 2 Jan 2006 15:04:05 GMT", "Mon, 2 Jan 2006 15:04:05 UTC", "Mon, 2 Jan 2006 15:04:05 -0700", time.RFC3339}

// NotBeforeLayout is the documented shape of NotBefore, RFC 1123 in GMT
// (Mon, 19 Sep 2016 18:29:47 GMT); FormatNotBefore writes it.
const NotBeforeLayout = "Mon, 02 Jan 2006 15:04:05 GMT"

// FormatNotBefore writes t as Scheduled Events documents NotBefore.
func FormatNotBefore(t time.Time) string { return t.UTC().Format(NotBeforeLayout) }

// ParseNotBefore reads a NotBefore time, in UTC.
func ParseNotBefore(s string) (time.Time, error) {
	for _, layout := range notBeforeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("NotBefore %q is neither RFC 1123 (Mon, 19 Sep 2016 18:29:47 GMT) nor RFC 3339 (2016-09-19T18:29:47Z)", clip(s))
}

// clip shows the start of a value that may be long.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
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
