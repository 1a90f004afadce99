package providertest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/signature"
)

// Conformance is what one adapter declares for the checks every adapter must pass (Run): its
// settings, how its provider authenticates a request, its documented event types and its
// fixtures (payloads from the provider's own documentation or SDK fixtures).
type Conformance struct {
	Provider string
	// Adapter is a nil pointer of the package's adapter type ((*Adapter)(nil)): provider.New
	// must build one under Provider. WithoutSecrets says the provider is registered so.
	Adapter        any
	WithoutSecrets bool
	Settings       provider.Settings
	// Sign returns the request the provider sends for body at at: signed, or carrying its
	// credentials, with the headers a real request has.
	Sign func(t testing.TB, body []byte, at time.Time) provider.Request
	// Tamper changes a signed request so that it must be refused. Nil: one byte of the body
	// changes, for a provider whose signature covers the body. A provider that signs something
	// else (Mailgun signs a timestamp and a token) or nothing (Postmark's credentials) says what
	// tampering it can detect.
	Tamper func(r provider.Request) provider.Request
	// Tolerance is the window for a signed timestamp (the provider's default, or Settings'); 0
	// when the provider signs none (the stale check is skipped, and says why). StaleErr is the
	// error a stale one wraps; nil: signature.ErrTimestampOutOfTolerance.
	Tolerance time.Duration
	StaleErr  error
	// Resend returns body as the provider sends the same event again (Mailgun signs each attempt
	// with a new timestamp and token). Nil: the same bytes, signed again later.
	Resend func(t testing.TB, body []byte) []byte
	// Documented maps each event type the provider documents to the kinds and statuses it may
	// mean (docs/providers/<provider>.md: Mailgun's failed is deferred, bounced or failed by its
	// severity). Every one must be the Type of an event in some fixture, parsed to one of them.
	Documented map[string][]provider.Class
	// Fixtures are files under testdata (the adapter's package), each one request body.
	Fixtures []string
	// Meta is what each fixture's events carry of the sender's metadata and tags, keyed
	// "file/index" or, for a single-event request, "file" (a fixture not listed carries none).
	// At least one fixture must carry metadata or tags unless NoMetadata says why not.
	Meta       map[string]Meta
	NoMetadata string
}

// Run checks c's adapter: every fixture, signed, is verified and parses into storable events
// that survive a JSON round trip; a tampered request is refused; a stale or future timestamp is
// refused where the provider signs one; the same event sent again has the same keys; every
// documented type is mapped as documented; metadata and tags are carried.
func Run(t *testing.T, c Conformance) {
	t.Helper()
	a, err := provider.New(c.Provider, c.Settings)
	if err != nil {
		t.Fatalf("provider.New(%q): %v", c.Provider, err)
	}
	if reflect.TypeOf(a) != reflect.TypeOf(c.Adapter) {
		t.Fatalf("provider.New(%q) returned %T, want %T", c.Provider, a, c.Adapter)
	}
	if provider.NeedsSecrets(c.Provider) == c.WithoutSecrets {
		t.Fatalf("provider %q: registered needing secrets %v, want %v", c.Provider, !c.WithoutSecrets, c.WithoutSecrets)
	}
	if len(c.Fixtures) == 0 {
		t.Fatal("no fixtures")
	}
	now := time.Now()
	bodies := make(map[string][]byte, len(c.Fixtures))
	for _, f := range c.Fixtures {
		b, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		bodies[f] = b
	}
	parsed := map[string][]domain.Event{}

	t.Run("signature accepted", func(t *testing.T) {
		for _, f := range c.Fixtures {
			req := c.Sign(t, bodies[f], now)
			if err := a.Verify(req); err != nil {
				t.Errorf("%s: Verify: %v", f, err)
				continue
			}
			evs, err := a.Parse(req)
			if err != nil || len(evs) == 0 {
				t.Errorf("%s: Parse: %v (%d events)", f, err, len(evs))
				continue
			}
			parsed[f] = evs
			for i, ev := range evs {
				roundTrip(t, fmt.Sprintf("%s/%d", f, i), ev)
			}
		}
	})

	t.Run("tampered request refused", func(t *testing.T) {
		tamper := c.Tamper
		if tamper == nil {
			tamper = flipByte
		}
		for _, f := range c.Fixtures {
			req := tamper(c.Sign(t, bodies[f], now))
			if err := a.Verify(req); !errors.Is(err, provider.ErrUnauthorized) {
				t.Errorf("%s: tampered request: Verify = %v, want unauthorized", f, err)
			}
		}
	})

	t.Run("stale timestamp refused", func(t *testing.T) {
		if c.Tolerance == 0 {
			t.Skipf("%s signs no timestamp", c.Provider)
		}
		f := c.Fixtures[0]
		staleErr := c.StaleErr
		if staleErr == nil {
			staleErr = signature.ErrTimestampOutOfTolerance
		}
		for _, at := range []time.Time{now.Add(-c.Tolerance - 2*time.Minute), now.Add(c.Tolerance + 2*time.Minute)} {
			err := a.Verify(c.Sign(t, bodies[f], at))
			if !errors.Is(err, provider.ErrUnauthorized) || !errors.Is(err, staleErr) {
				t.Errorf("signed %s from now: Verify = %v, want a timestamp outside tolerance", at.Sub(now).Round(time.Minute), err)
			}
		}
		inside := now.Add(-c.Tolerance + 2*time.Minute)
		if err := a.Verify(c.Sign(t, bodies[f], inside)); err != nil {
			t.Errorf("signed just inside the tolerance: %v", err)
		}
	})

	t.Run("dedupe key stable across re-sends", func(t *testing.T) {
		for _, f := range c.Fixtures {
			again := bodies[f]
			if c.Resend != nil {
				again = c.Resend(t, again)
			}
			req := c.Sign(t, again, now.Add(time.Minute))
			if err := a.Verify(req); err != nil {
				t.Errorf("%s re-sent: Verify: %v", f, err)
				continue
			}
			evs, err := a.Parse(req)
			if err != nil {
				t.Errorf("%s re-sent: Parse: %v", f, err)
				continue
			}
			if got, want := keys(evs), keys(parsed[f]); !reflect.DeepEqual(got, want) {
				t.Errorf("%s re-sent: keys %v, first %v", f, got, want)
			}
		}
	})

	t.Run("each documented event type mapped", func(t *testing.T) {
		seen := map[string]bool{}
		for _, f := range c.Fixtures {
			for i, ev := range parsed[f] {
				want, documented := c.Documented[ev.Type]
				if !documented {
					continue
				}
				seen[ev.Type] = true
				if !slices.Contains(want, provider.Class{Kind: ev.Kind, Status: ev.Status}) {
					t.Errorf("%s/%d: %q is %s/%s, documented as one of %v", f, i, ev.Type, ev.Kind, ev.Status, want)
				}
			}
		}
		var missing []string
		for typ := range c.Documented {
			if !seen[typ] {
				missing = append(missing, typ)
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			t.Errorf("documented types with no fixture: %s", strings.Join(missing, ", "))
		}
	})

	t.Run("metadata and tags carried", func(t *testing.T) {
		carried := 0
		for _, f := range c.Fixtures {
			for i, ev := range parsed[f] {
				key := fmt.Sprintf("%s/%d", strings.TrimSuffix(f, filepath.Ext(f)), i)
				want, ok := c.Meta[key]
				if !ok && len(parsed[f]) == 1 {
					want = c.Meta[strings.TrimSuffix(f, filepath.Ext(f))]
				}
				got := Meta{Metadata: ev.Metadata, Tags: ev.Tags, Dropped: ev.MetadataDropped}
				want.Engagement = nil
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s: metadata and tags %#v, want %#v", key, got, want)
				}
				if len(ev.Metadata) > 0 || len(ev.Tags) > 0 {
					carried++
				}
			}
		}
		if carried == 0 && c.NoMetadata == "" {
			t.Error("no fixture carries metadata or tags")
		}
	})
}

// roundTrip checks what a parsed event must be to be stored and be a workflow's input: a key,
// no prior id (that is for the acceptance insert only), and JSON that decodes to the same
// event, its raw payload included.
func roundTrip(t *testing.T, where string, ev domain.Event) {
	t.Helper()
	if ev.EventID == "" || ev.Provider == "" {
		t.Errorf("%s: no key: %+v", where, ev)
	}
	if len(ev.Raw) > 0 && !json.Valid(ev.Raw) {
		t.Errorf("%s: raw payload is not JSON", where)
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Errorf("%s: marshal: %v", where, err)
		return
	}
	var back domain.Event
	if err := json.Unmarshal(b, &back); err != nil {
		t.Errorf("%s: unmarshal: %v", where, err)
		return
	}
	if back.Key() != ev.Key() || back.PriorEventID != "" || !back.OccurredAt.Equal(ev.OccurredAt) ||
		back.Kind != ev.Kind || back.Status != ev.Status || !sameJSON(back.Raw, ev.Raw) {
		t.Errorf("%s: the event does not survive a JSON round trip (key %s, back %s)", where, ev.Key(), back.Key())
	}
}

// sameJSON compares two JSON documents by value (a round trip escapes <, > and & as \u003c…).
func sameJSON(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

func keys(evs []domain.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Provider + ":" + ev.EventID
	}
	return out
}

// flipByte changes one byte in the middle of the body (after the request was signed).
func flipByte(r provider.Request) provider.Request {
	b := bytes.Clone(r.Body)
	if len(b) > 0 {
		b[len(b)/2] ^= 0x01
	}
	r.Body = b
	return r
}

// Innermost is the error an adapter's error wraps last: the short reason the HTTP layer sends.
func Innermost(err error) error {
	for {
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			errs := u.Unwrap()
			err = errs[len(errs)-1]
		case interface{ Unwrap() error }:
			next := u.Unwrap()
			if next == nil {
				return err
			}
			err = next
		default:
			return err
		}
	}
}
