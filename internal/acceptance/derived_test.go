package acceptance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/acceptance"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/ses"
	"github.com/mailhook/mailhook/internal/start"
	"github.com/mailhook/mailhook/internal/store/storetest"
	"github.com/mailhook/mailhook/internal/testenv"
)

const sesTopic = "arn:aws:sns:us-east-1:123456789012:ses-events"

// sesBounce is an SNS notification of an SES hard bounce naming n recipients (about 160 bytes
// each, as a real bounce's entries are) and the events the SES adapter derives from it, one per
// recipient, each carrying the whole envelope as parsed.
func sesBounce(t testing.TB, id string, n int) ([]byte, []domain.Event) {
	t.Helper()
	var rcpts, dest []string
	for i := range n {
		a := fmt.Sprintf("recipient-%04d@example.com", i)
		rcpts = append(rcpts, fmt.Sprintf(`{"emailAddress":%q,"action":"failed","status":"5.1.1","diagnosticCode":"smtp; 550 5.1.1 <%s>: Recipient address rejected: User unknown in virtual mailbox table"}`, a, a))
		dest = append(dest, fmt.Sprintf("%q", a))
	}
	msg := `{"notificationType":"Bounce","bounce":{"bounceType":"Permanent","bounceSubType":"General","bouncedRecipients":[` +
		strings.Join(rcpts, ",") + `],"timestamp":"2026-12-05T00:00:01.000Z","feedbackId":"f-` + id + `"},"mail":{"timestamp":"2026-12-05T00:00:00.000Z","source":"sender@example.com","messageId":"mail-` +
		id + `","destination":[` + strings.Join(dest, ",") + `]}}`
	env, err := json.Marshal(map[string]string{
		"Type": "Notification", "MessageId": id, "TopicArn": sesTopic, "Message": msg,
		"Timestamp": "2026-12-05T00:00:02.000Z", "SignatureVersion": "2", "Signature": "c2ln",
		"SigningCertURL": "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-x.pem",
	})
	require.NoError(t, err)
	a, err := ses.New(provider.Settings{TopicARNs: []string{sesTopic}})
	require.NoError(t, err)
	evs, err := a.Parse(provider.Request{Ctx: t.Context(), Header: nil, Body: env})
	require.NoError(t, err)
	require.Len(t, evs, n)
	return env, evs
}

// An SES notification naming 1,000 recipients is stored with its body once: the events' payloads
// together are at most twice the body, each event's own row stays small, the events after the
// first name the one that holds the body, and a re-send is 1,000 duplicates (issue 41: the
// envelope was stored once per event, 146 MB of jsonb for a 145 KB request).
func TestADerivedRequestStoresItsBodyOnce(t *testing.T) {
	s := storetest.Open(t)
	a := acceptance.NewAcceptor(s.Inbox, nil)
	body, evs := sesBounce(t, "sns-derived-1000", 1000)
	began := time.Now()
	verdicts, err := a.Accept(t.Context(), evs)
	took := time.Since(began)
	require.NoError(t, err)
	for i, v := range verdicts {
		require.Equal(t, acceptance.Accepted, v.Status, "event %d", i)
	}
	assert.NotEmpty(t, evs[1].Raw, "the caller's events stay as parsed")

	var payloads, events, keys, n int
	require.NoError(t, storetest.Pool(t, s).QueryRow(t.Context(), `SELECT sum(pg_column_size(payload)), sum(pg_column_size(event)), count(*)
FROM event_payloads WHERE provider = 'ses'`).Scan(&payloads, &events, &n))
	require.NoError(t, storetest.Pool(t, s).QueryRow(t.Context(), `SELECT sum(pg_column_size(w.*)) FROM webhook_events w WHERE provider = 'ses'`).Scan(&keys))
	t.Logf("body %d bytes, %d events: payloads %d bytes, normalized events %d bytes (%d per event), keys %d bytes; accepted in %s",
		len(body), n, payloads, events, events/n, keys, took)
	assert.Equal(t, 1000, n)
	assert.LessOrEqual(t, payloads, 2*len(body), "the body is stored once")
	assert.Less(t, events/n, 2048, "an event's own row holds its own fields")

	first, _, _, err := s.Events.StoredEvent(t.Context(), "ses", evs[0].EventID)
	require.NoError(t, err)
	assert.JSONEq(t, string(body), string(first.Raw), "the first event holds the body")
	other, _, _, err := s.Events.StoredEvent(t.Context(), "ses", evs[500].EventID)
	require.NoError(t, err)
	assert.Empty(t, other.Raw)
	assert.Equal(t, evs[0].EventID, other.RawOf)
	assert.Equal(t, evs[500].Recipient, other.Recipient)

	verdicts, err = a.Accept(t.Context(), evs)
	require.NoError(t, err)
	for i, v := range verdicts {
		require.Equal(t, acceptance.Duplicate, v.Status, "re-sent event %d", i)
	}
}

// While PostgreSQL is down, each run started for such a request carries its own event: only the
// first carries the body, so the inputs together are about the body once, not once per event.
// A request whose client is gone starts nothing more and is answered 503.
func TestADerivedRequestThroughTemporalCarriesEachEventsOwnFields(t *testing.T) {
	starts := &temporalStarts{started: map[string]domain.Event{}}
	a := acceptance.NewAcceptor(downStore{err: &pgconn.PgError{Code: "57P01", Message: "terminating connection"}}, nil)
	a.Through = starts
	body, evs := sesBounce(t, "sns-derived-down", 1000)
	began := time.Now()
	verdicts, err := a.Accept(t.Context(), evs)
	took := time.Since(began)
	require.NoError(t, err)
	total, largest, holders := 0, 0, 0
	for i, v := range verdicts {
		require.Equal(t, acceptance.Accepted, v.Status, "event %d", i)
		in, err := json.Marshal(domain.AcceptedEvent{Event: starts.started[evs[i].Key()]})
		require.NoError(t, err)
		total, largest = total+len(in), max(largest, len(in))
		if len(starts.started[evs[i].Key()].Raw) > 0 {
			holders++
		}
	}
	t.Logf("body %d bytes, 1000 runs: inputs %d bytes in all, largest %d, of the others at most %d; accepted in %s",
		len(body), total, largest, (total-largest)/999+1, took)
	assert.Equal(t, 1, holders, "one run carries the body")
	assert.LessOrEqual(t, total, 2*len(body)+1000*2048)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	starts = &temporalStarts{started: map[string]domain.Event{}}
	a.Through = starts
	_, evs = sesBounce(t, "sns-derived-gone", 50)
	_, err = a.Accept(ctx, evs)
	require.Error(t, err, "the client is gone: 503")
	assert.Empty(t, starts.started, "nothing is started for a request nobody waits for")
}

// BenchmarkAcceptDerived1000 accepts an SES notification naming 1,000 recipients into
// PostgreSQL, a fresh one each iteration (docs/BENCHMARKS.md).
func BenchmarkAcceptDerived1000(b *testing.B) {
	s := storetest.Open(b)
	a := acceptance.NewAcceptor(s.Inbox, nil)
	i := 0
	for b.Loop() {
		b.StopTimer()
		_, evs := sesBounce(b, fmt.Sprintf("sns-bench-%d", i), 1000)
		i++
		b.StartTimer()
		if _, err := a.Accept(b.Context(), evs); err != nil {
			b.Fatal(err)
		}
	}
}

// slowStarts is Temporal answering each start after delay.
type slowStarts struct {
	temporalStarts
	delay time.Duration
}

func (s *slowStarts) StartAccepted(ctx context.Context, ev domain.Event) (start.Status, error) {
	time.Sleep(s.delay)
	return s.temporalStarts.StartAccepted(ctx, ev)
}

// A request whose deadline passes while its events are started through Temporal starts no more
// after it: it is answered 503 (an error) within a start's time of the deadline, not after all of
// them, and what was started stays started, so the provider's retry finds those as duplicates.
func TestADerivedRequestStopsStartingAtItsDeadline(t *testing.T) {
	starts := &slowStarts{temporalStarts: temporalStarts{started: map[string]domain.Event{}}, delay: 20 * time.Millisecond}
	a := acceptance.NewAcceptor(downStore{err: &pgconn.PgError{Code: "57P01", Message: "terminating connection"}}, nil)
	a.Through = starts
	_, evs := sesBounce(t, "sns-derived-deadline", 1000)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err := a.Accept(ctx, evs)
	require.Error(t, err, "the deadline passed: 503")
	started := len(starts.started)
	t.Logf("%d of 1000 started before the deadline (%v)", started, err)
	assert.Less(t, started, 1000, "starting stopped at the deadline")

	verdicts, err := a.Accept(t.Context(), evs)
	require.NoError(t, err, "the provider's retry")
	dups := 0
	for _, v := range verdicts {
		if v.Status == acceptance.Duplicate {
			dups++
		}
	}
	assert.Equal(t, started, dups, "what was started before is a duplicate, the rest accepted")
}

// A body the store cannot keep rejects every event derived from it, as it did when each carried
// it; one event's own bad field rejects that event only, and the body goes with the next.
func TestADerivedRequestsBadBodyRejectsEachOfItsEvents(t *testing.T) {
	starts := &temporalStarts{started: map[string]domain.Event{}}
	a := acceptance.NewAcceptor(downStore{err: &pgconn.PgError{Code: "57P01", Message: "terminating connection"}}, nil)
	a.Through = starts
	derived := func(raw []byte) []domain.Event {
		evs := []domain.Event{ev("evt_a"), ev("evt_b"), ev("evt_c")}
		for i := range evs {
			evs[i].Raw = raw
		}
		return evs
	}
	verdicts, err := a.Accept(t.Context(), derived([]byte("{\"x\":\"\xff\"}")))
	require.NoError(t, err)
	for i, v := range verdicts {
		assert.Equal(t, acceptance.Rejected, v.Status, "event %d of a body that is not UTF-8", i)
	}
	evs := derived([]byte(`{"ok":true}`))
	evs[0].MessageID = "msg\x00"
	verdicts, err = a.Accept(t.Context(), evs)
	require.NoError(t, err)
	assert.Equal(t, []acceptance.Status{acceptance.Rejected, acceptance.Accepted, acceptance.Accepted},
		[]acceptance.Status{verdicts[0].Status, verdicts[1].Status, verdicts[2].Status})
	assert.JSONEq(t, `{"ok":true}`, string(starts.started["postscale:evt_b"].Raw), "the first event accepted holds the body")
	assert.Equal(t, "evt_b", starts.started["postscale:evt_c"].RawOf)
}

// The same request, PostgreSQL down, through a real Temporal dev server: 1,000 starts, each
// input bounded (only the first carries the body), the request answered in bounded time, and a
// re-send 1,000 duplicates (docs/BENCHMARKS.md "One request naming 1,000 recipients").
func TestADerivedRequestThroughARealTemporal(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping integration test")
	}
	srv := testenv.StartTemporal(t, testenv.DevServerOptions{})
	starter := &start.Starter{Client: srv.Client(), TaskQueue: "derived-no-worker", Timeout: 30 * time.Second, MaxAcceptedBytes: 1536 << 10}
	a := acceptance.NewAcceptor(downStore{err: &pgconn.PgError{Code: "57P01", Message: "terminating connection"}}, nil)
	a.Through = starter
	body, evs := sesBounce(t, "sns-derived-temporal", 1000)
	began := time.Now()
	verdicts, err := a.Accept(t.Context(), evs)
	took := time.Since(began)
	require.NoError(t, err)
	for i, v := range verdicts {
		require.Equal(t, acceptance.Accepted, v.Status, "event %d", i)
	}
	began = time.Now()
	verdicts, err = a.Accept(t.Context(), evs)
	again := time.Since(began)
	require.NoError(t, err)
	for i, v := range verdicts {
		require.Equal(t, acceptance.Duplicate, v.Status, "re-sent event %d", i)
	}
	t.Logf("body %d bytes: 1000 runs started through Temporal in %s, the re-send answered (1000 duplicates) in %s",
		len(body), took.Round(time.Millisecond), again.Round(time.Millisecond))
}
