package faultproxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fault is what the proxy does to one request instead of forwarding it
// faithfully.
type fault int

const (
	noFault     fault = iota
	throttle          // 429 before the API server
	serverError       // 5xx before the API server
	lostAnswer        // applied by the API server, answered 5xx
)

// decision is everything random about one request.
type decision struct {
	delay      time.Duration
	fault      fault
	code       int  // status of a serverError or lostAnswer
	retryAfter bool // a 503 that says when to come back
	watchCut   time.Duration
}

var (
	serverErrorCodes = []int{http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout}
	// A lost answer is what a client sees when the API server applied the
	// write but timed out or failed after it.
	lostAnswerCodes = []int{http.StatusGatewayTimeout, http.StatusInternalServerError}
)

// decide draws one request's decision. Every request draws the same four
// numbers, whatever it turns out to be, so that whether one request was a
// write does not shift the decisions of those after it.
func (p *Proxy) decide(mutating bool) decision {
	p.mu.Lock()
	delay := p.rng.Int64N(int64(p.cfg.Latency) + 1)
	roll := p.rng.Float64()
	pick := p.rng.Uint64()
	lo, hi := p.cfg.WatchCut[0], p.cfg.WatchCut[1]
	cut := lo + time.Duration(p.rng.Int64N(int64(hi-lo)+1))
	p.mu.Unlock()

	d := decision{delay: time.Duration(delay), watchCut: cut}
	throttled := p.cfg.Throttle
	failed := throttled + p.cfg.Errors
	lost := failed + p.cfg.LostAnswers
	switch {
	case roll < throttled:
		d.fault = throttle
	case roll < failed:
		d.fault = serverError
		d.code = serverErrorCodes[pick%uint64(len(serverErrorCodes))]
		d.retryAfter = d.code == http.StatusServiceUnavailable && (pick>>8)%2 == 0
	case mutating && roll < lost:
		d.fault = lostAnswer
		d.code = lostAnswerCodes[pick%uint64(len(lostAnswerCodes))]
	}
	return d
}

// isStartupPath tells discovery, version, OpenAPI and health-check paths,
// which clients use to start rather than to reconcile.
func isStartupPath(path string) bool {
	for _, prefix := range []string{"/openapi", "/version", "/healthz", "/livez", "/readyz"} {
		if path == prefix || strings.HasPrefix(path, prefix+"/") {
			return true
		}
	}
	// Discovery documents are /api, /api/v1, /apis, /apis/GROUP and
	// /apis/GROUP/VERSION; anything deeper names resources.
	segments := strings.Split(strings.Trim(path, "/"), "/")
	switch segments[0] {
	case "api":
		return len(segments) <= 2
	case "apis":
		return len(segments) <= 3
	}
	return false
}

// isWatch tells a request that opens a watch stream, in either of the API
// server's spellings.
func isWatch(r *http.Request) bool {
	if strings.Contains(r.URL.Path, "/watch/") {
		return true
	}
	switch strings.ToLower(r.URL.Query().Get("watch")) {
	case "true", "1":
		return true
	}
	return false
}

func isMutating(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// throttleStatus is what API Priority and Fairness answers when it rejects
// a request.
func throttleStatus() metav1.Status {
	return status(http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests,
		"Too many requests, please try again later (injected by faultproxy).", true)
}

// errorStatus is a 5xx as the API server or a proxy in front of it writes it.
// apimachinery itself reads a 502 as an InternalError.
func errorStatus(code int, retryAfter bool) metav1.Status {
	switch code {
	case http.StatusServiceUnavailable:
		return status(code, metav1.StatusReasonServiceUnavailable,
			"The server is currently unable to handle the request (injected by faultproxy).", retryAfter)
	case http.StatusGatewayTimeout:
		return timeoutStatus("The request did not complete within the allotted timeout (injected by faultproxy).")
	default:
		return status(code, metav1.StatusReasonInternalError,
			"Internal error occurred: "+http.StatusText(code)+" (injected by faultproxy).", retryAfter)
	}
}

func timeoutStatus(message string) metav1.Status {
	return status(http.StatusGatewayTimeout, metav1.StatusReasonTimeout, message, false)
}

func status(code int, reason metav1.StatusReason, message string, retryAfter bool) metav1.Status {
	s := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Message:  message,
		Reason:   reason,
		Code:     int32(code), //nolint:gosec // G115: HTTP status codes fit
	}
	if retryAfter {
		s.Details = &metav1.StatusDetails{RetryAfterSeconds: 1}
	}
	return s
}

// writeStatus answers with s, and with the Retry-After header that its
// details ask for, which is what client-go reads.
func writeStatus(w http.ResponseWriter, s metav1.Status) {
	body := encode(s)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if s.Details != nil && s.Details.RetryAfterSeconds > 0 {
		h.Set("Retry-After", strconv.Itoa(int(s.Details.RetryAfterSeconds)))
	}
	w.WriteHeader(int(s.Code))
	_, _ = w.Write(body)
}

// replaceAnswer throws away the API server's answer, after reading it so
// the write is surely complete, and puts s in its place.
func replaceAnswer(resp *http.Response, s metav1.Status) {
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	body := encode(s)
	resp.StatusCode = int(s.Code)
	resp.Status = strconv.Itoa(int(s.Code)) + " " + http.StatusText(int(s.Code))
	resp.Header = http.Header{
		"Content-Type":   {"application/json"},
		"Content-Length": {strconv.Itoa(len(body))},
	}
	resp.Trailer = nil
	resp.ContentLength = int64(len(body))
	resp.Body = io.NopCloser(bytes.NewReader(body))
}

func encode(s metav1.Status) []byte {
	body, err := json.Marshal(s)
	if err != nil {
		// A Status is plain data; this cannot happen.
		panic(err)
	}
	return body
}
