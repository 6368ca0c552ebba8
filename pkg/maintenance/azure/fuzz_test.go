package azure

import (
	"testing"

	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// FuzzParseDocument feeds the parser arbitrary answers, seeded with the
// documented ones. Whatever comes in, it must not panic, and what it maps
// must be an event sluice can act on: an ID, a known type and status, and a
// deadline that is NotBefore.
func FuzzParseDocument(f *testing.F) {
	for _, seed := range []string{docFreeze, docPreempt, docUserStarted, docRFC3339, docEmpty,
		`{"DocumentIncarnation": 1, "Events": [{"EventId": "x", "Resources": ["vm"], "DurationInSeconds": "900"}, 7, null]}`,
		`{"Events": {}}`, `<html>gateway</html>`, ``} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		doc, err := ParseDocument(body)
		if err != nil {
			return
		}
		vms := map[string]bool{"vm": true}
		for _, e := range doc.Events {
			for _, r := range e.Resources {
				vms[r] = true
			}
		}
		for vm := range vms {
			events, _ := doc.EventsFor(vm)
			for _, e := range events {
				if e.ID == "" || e.Source != maintenance.SourceAzure || !e.Active() || !e.Deadline.Equal(e.NotBefore) ||
					(!e.NotBefore.IsZero() && e.NotBefore.Location().String() != "UTC") || e.Duration != nil && *e.Duration < 0 {
					t.Fatalf("mapped %+v from %q", e, body)
				}
				switch e.Type {
				case maintenance.TypeFreeze, maintenance.TypeReboot, maintenance.TypeRedeploy, maintenance.TypePreempt, maintenance.TypeTerminate:
				default:
					t.Fatalf("type %q from %q", e.Type, body)
				}
			}
		}
	})
}
