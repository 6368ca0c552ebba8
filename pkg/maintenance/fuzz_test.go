package maintenance_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// FuzzReport reads arbitrary values of the annotations the agent writes on
// its node: the report of events, and the list of events it approved. Any
// node's annotations can be written by whoever may patch the node, so the
// controller must never panic on them. A report that is not JSON is an
// error, never "no events"; one that reads re-encodes to a value that reads
// back the same; and every event of it can be found by its ID.
func FuzzReport(f *testing.F) {
	deadline := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	for _, seed := range [][2]string{
		{maintenance.NewReport(maintenance.SourceAzure, true, []maintenance.Event{{
			ID: "C7061BAC-AFDC-4513-B24B-AA5F13A16123", Source: maintenance.SourceAzure, Type: maintenance.TypeFreeze,
			Status: maintenance.StatusScheduled, NotBefore: deadline, Deadline: deadline, Duration: maintenance.DurationOf(9 * time.Second),
			Initiator: maintenance.InitiatorPlatform, Description: "Host server is undergoing maintenance.", Resources: []string{"vmss_2"},
		}}).Encode(), "C7061BAC-AFDC-4513-B24B-AA5F13A16123"},
		{maintenance.NewReport(maintenance.SourceAWS, false, []maintenance.Event{
			{ID: "spot-itn-1", Source: maintenance.SourceAWS, Type: maintenance.TypePreempt, Status: maintenance.StatusScheduled, NotBefore: deadline, Deadline: deadline},
			{ID: "rebalance", Source: maintenance.SourceAWS, Type: maintenance.TypeRebalance, Status: maintenance.StatusStarted},
		}).WithRejected([]error{errors.New(`scheduled event 2: "NotBefore": "tomorrow" is no time`)}).Encode(), ""},
		{maintenance.NewReport(maintenance.SourceGCP, false, nil).Encode(), "a,b,,c"},
		{`{"source": "gcp", "events": [{"id": "x", "deadline": "0000-01-01T00:00:00+01:00", "duration": -1}, {"id": "x"}]}`, "x"},
		{`{"source": "azure", "events": null, "rejected": ["a", "a"]}`, ","},
		{`{"events": [{"notBefore": "9999-12-31T23:59:59-23:59"}]}`, ""},
		{`{"events": {}}`, ""}, {`null`, ""}, {`{`, ""}, {``, ""}, {"{\"source\": \"\xff\"}", "\xff"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, raw, approved string) {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: map[string]string{
			contract.AnnotationMaintenanceEvents: raw, contract.AnnotationMaintenanceApproved: approved}}}
		r, ok, err := maintenance.ReportOf(node)
		if !ok {
			t.Fatalf("ReportOf(%q): no report, with the annotation there", raw)
		}
		for _, id := range strings.Split(approved, ",") {
			if !maintenance.Approved(node, id) {
				t.Fatalf("approved %q: Approved(%q) is false", approved, id)
			}
		}
		if err != nil {
			if len(r.Events) != 0 {
				t.Fatalf("ReportOf(%q) = %+v with %v; an unreadable report has no events", raw, r, err)
			}
			return
		}
		if !json.Valid([]byte(raw)) {
			t.Fatalf("ReportOf(%q) read a report from what is not JSON: %+v", raw, r)
		}
		for _, e := range r.Events {
			if got, found := r.Find(e.ID); !found || got.ID != e.ID {
				t.Fatalf("%q: Find(%q) = %+v, %t", raw, e.ID, got, found)
			}
		}
		enc := roundTrip(t, r)
		// The agent writes reports made by NewReport; one made from what
		// the controller read must round-trip too.
		rejected := make([]error, len(r.Rejected))
		for i, s := range r.Rejected {
			rejected[i] = errors.New(s)
		}
		remade := maintenance.NewReport(r.Source, r.Approvable, r.Events).WithRejected(rejected)
		if !slices.IsSortedFunc(remade.Events, func(a, b maintenance.Event) int { return strings.Compare(a.ID, b.ID) }) {
			t.Fatalf("NewReport left its events unsorted: %+v", remade.Events)
		}
		roundTrip(t, remade)
		if len(remade.Events) != len(r.Events) || enc == "" {
			t.Fatalf("%q: remade %+v from %+v", raw, remade, r)
		}
	})
}

// roundTrip encodes r as the agent does, reads it back as the controller
// does, and requires the same value; it returns the encoding.
func roundTrip(t *testing.T, r maintenance.Report) string {
	t.Helper()
	enc := r.Encode()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: map[string]string{contract.AnnotationMaintenanceEvents: enc}}}
	back, _, err := maintenance.ReportOf(node)
	if err != nil {
		t.Fatalf("report %+v encodes as %q, which reads as %v", r, enc, err)
	}
	if again := back.Encode(); again != enc {
		t.Fatalf("report encodes as %q, which reads back as %q", enc, again)
	}
	return enc
}
