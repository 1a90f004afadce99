package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/mailhook/mailhook/internal/signature"
)

// Notification is what the sink learnt about one webhook-id.
type Notification struct {
	ID         string
	Type       string
	Provider   string
	MessageID  string
	EventID    string
	Status     string
	Version    int64
	Deliveries int       // HTTP requests that carried this id
	First      time.Time // first receipt
}

// Sink is the downstream receiver a mailhook under test notifies: it verifies every
// Standard Webhooks signature and counts notifications by webhook-id.
type Sink struct {
	Secret string
	scheme *signature.Standard

	mu          sync.Mutex
	byID        map[string]*Notification
	deliveries  int
	badSig      int
	badBody     int
	idMismatch  int
	lastErr     string
	srv         *http.Server
	ln          net.Listener
	closeServed chan struct{}
}

// StartSink listens on addr (loopback only) and serves until Close.
func StartSink(addr, secret string) (*Sink, error) {
	if err := requireLoopbackHostPort(addr); err != nil {
		return nil, fmt.Errorf("--sink-listen: %w", err)
	}
	scheme, err := signature.NewStandard(secret, 5*time.Minute)
	if err != nil {
		return nil, fmt.Errorf("--sink-secret: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("sink: listen on %s: %w", addr, err)
	}
	s := &Sink{Secret: secret, scheme: scheme, byID: map[string]*Notification{}, ln: ln, closeServed: make(chan struct{})}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second}
	go func() {
		defer close(s.closeServed)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// Addr is the address the sink listens on.
func (s *Sink) Addr() string { return s.ln.Addr().String() }

// Close stops the sink.
func (s *Sink) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
	<-s.closeServed
}

// notificationBody is the part of a mailhook notification the verdict reads.
type notificationBody struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	Data struct {
		Provider  string `json:"provider"`
		MessageID string `json:"message_id"`
		EventID   string `json:"event_id"`
		Status    string `json:"status"`
		Version   int64  `json:"version"`
	} `json:"data"`
}

func (s *Sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	id := r.Header.Get(signature.HeaderWebhookID)
	if err := s.scheme.Verify(id, r.Header.Get(signature.HeaderWebhookTimestamp),
		r.Header.Get(signature.HeaderWebhookSignature), body, now); err != nil {
		s.mu.Lock()
		s.badSig++
		s.lastErr = "bad signature: " + err.Error()
		s.mu.Unlock()
		// 4xx ends mailhook's retries: the verdict reports it, the run does not hang on it.
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var nb notificationBody
	decodeErr := json.Unmarshal(body, &nb)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deliveries++
	if decodeErr != nil {
		s.badBody++
		s.lastErr = "undecodable body: " + decodeErr.Error()
	}
	if nb.ID != id || r.Header.Get("Idempotency-Key") != id {
		s.idMismatch++
		s.lastErr = fmt.Sprintf("webhook-id %q, Idempotency-Key %q, body id %q differ", id, r.Header.Get("Idempotency-Key"), nb.ID)
	}
	n := s.byID[id]
	if n == nil {
		n = &Notification{ID: id, Type: nb.Type, Provider: nb.Data.Provider, MessageID: nb.Data.MessageID,
			EventID: nb.Data.EventID, Status: nb.Data.Status, Version: nb.Data.Version, First: now}
		s.byID[id] = n
	}
	n.Deliveries++
	w.WriteHeader(http.StatusOK)
}

// SinkStats is the sink's tally.
type SinkStats struct {
	Deliveries  int    `json:"deliveries"`   // HTTP requests with a valid signature
	DistinctIDs int    `json:"distinct_ids"` // distinct webhook-ids among them
	Repeated    int    `json:"repeated_ids"` // ids delivered more than once (allowed: same id)
	BadSig      int    `json:"bad_signatures"`
	BadBody     int    `json:"bad_bodies"`
	IDMismatch  int    `json:"id_mismatches"`
	LastError   string `json:"last_error,omitempty"`
}

// Stats returns the tally so far.
func (s *Sink) Stats() SinkStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := SinkStats{Deliveries: s.deliveries, DistinctIDs: len(s.byID), BadSig: s.badSig, BadBody: s.badBody,
		IDMismatch: s.idMismatch, LastError: s.lastErr}
	for _, n := range s.byID {
		if n.Deliveries > 1 {
			st.Repeated++
		}
	}
	return st
}

// Notifications copies what the sink received, by id.
func (s *Sink) Notifications() map[string]Notification {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]Notification, len(s.byID))
	for k, v := range s.byID {
		out[k] = *v
	}
	return out
}

// requireLoopbackHostPort accepts host:port whose host is a loopback address or localhost.
func requireLoopbackHostPort(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	return requireLoopbackHost(host)
}

func requireLoopbackHost(host string) error {
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return errors.New("only loopback addresses (127.0.0.1, ::1, localhost) are allowed: the load generator never sends off this machine")
	}
	return nil
}
