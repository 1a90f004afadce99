package store_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/apply"
	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/erasure"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
	"github.com/mailhook/mailhook/internal/suppression"
)

// erasureHasher is a test key's hasher.
func erasureHasher(t testing.TB) erasure.Hasher {
	t.Helper()
	h, err := erasure.NewHasher(bytes.Repeat([]byte("k"), erasure.MinKeyBytes))
	require.NoError(t, err)
	return h
}

// softBounce counts loadPerson's soft bounce, so the erasure finds a soft_bounces row keyed by
// the address.
var softBounce = apply.Rules{Escalation: suppression.SoftBounce{Count: 3, Within: 24 * time.Hour}}

// The address to erase, as the data spells it, and its URL-encoded form.
const (
	janeAddress = "jane.doe@example.com"
	janeMixed   = "Jane.Doe@Example.COM"
	janeInURL   = "jane.doe%40example.com"
	bobAddress  = "bob@example.com"
)

// loadPerson records, through the store's own paths, what mailhook keeps about one address:
// an inbound email from it and its email.received notification, a hard bounce (suppressing it,
// with the address in its diagnostic, an unsubscribe link and a \u0040-escaped copy in the
// provider JSON) and its status notification, whose first delivery attempt failed with a sink
// error that echoes the address, a soft bounce, a lifted and re-added suppression, a correction
// whose note names it, a quarantine error naming it, and rows recorded before migration 00009
// (legacy payload columns and notification body). Ids carry tag.
func loadPerson(t *testing.T, s *store.Store, tag, address string) {
	t.Helper()
	ctx := t.Context()
	record := func(ev domain.Event) {
		t.Helper()
		_, err := s.Events.RecordEvent(ctx, ev)
		require.NoError(t, err)
	}
	apply := func(ev domain.Event) domain.ApplyResult {
		t.Helper()
		record(ev)
		res, err := s.Events.ApplyStatus(ctx, ev, softBounce)
		require.NoError(t, err)
		return res
	}
	local, domainPart, _ := strings.Cut(address, "@")
	msg := "msg_" + tag

	inbound := domain.Event{Provider: provider, EventID: "email.received:in_" + tag, Type: "email.received", Kind: domain.KindInbound,
		MessageID: "in_" + tag, Recipient: "support@app.example", OccurredAt: at(0),
		Raw: json.RawMessage(fmt.Sprintf(`{"from":%q,"to":"support@app.example","subject":"Please forget me","text":"I am %s, mail me at %s"}`,
			address, tag, strings.ToUpper(address)))}
	record(inbound)
	_, err := s.Notifications.EnsureNotification(ctx, delivery.Notification{Provider: provider, EventID: inbound.EventID, Sink: "app", Type: domain.TypeEmailReceived,
		Body: json.RawMessage(fmt.Sprintf(`{"type":"email.received","data":{"payload":%s}}`, inbound.Raw))})
	require.NoError(t, err)

	bounce := statusEvent("bounce_"+tag, msg, domain.StatusBounced, domain.BounceHard, at(1))
	bounce.Recipient = address
	bounce.Bounce = &domain.Bounce{SMTPCode: 550, EnhancedCode: "5.1.1", Diagnostic: "550 5.1.1 <" + address + ">: user unknown", Category: "unknown_user"}
	bounce.Raw = json.RawMessage(fmt.Sprintf(`{"id":"bounce_%s","to":"%s\u0040%s","unsubscribe":"https://app.example/u?e=%s%%40%s&t=1"}`,
		tag, local, domainPart, local, domainPart))
	require.True(t, apply(bounce).Suppressed)
	n, err := s.Notifications.EnsureNotification(ctx, delivery.Notification{Provider: provider, EventID: bounce.EventID, Sink: "app", Type: domain.TypeStatusChanged,
		Body: json.RawMessage(fmt.Sprintf(`{"type":"message.status_changed","data":{"recipient":%q}}`, address))})
	require.NoError(t, err)
	require.NoError(t, s.Notifications.RecordNotificationAttempt(ctx, n.ID, `notify: sink responded 422: {"error":"unknown recipient `+address+`"}`))

	soft := statusEvent("soft_"+tag, "msg_soft_"+tag, domain.StatusBounced, domain.BounceSoft, at(2))
	soft.Recipient = address
	apply(soft)

	_, err = s.Suppressions.LiftSuppression(ctx, address, suppression.GlobalScope, "ops", "ticket 7: "+address+" asked to be mailed again")
	require.NoError(t, err)
	again := statusEvent("again_"+tag, "msg_again_"+tag, domain.StatusBounced, domain.BounceHard, at(3))
	again.Recipient = address
	require.True(t, apply(again).Suppressed)

	correction := domain.Event{Provider: provider, EventID: "correction-" + tag, Type: domain.CorrectionType, Kind: domain.KindCorrection,
		Status: domain.StatusDelivered, MessageID: msg, OccurredAt: at(4),
		Raw: json.RawMessage(fmt.Sprintf(`{"status":"delivered","reason":"%s confirmed receipt","actor":"ops"}`, address))}
	apply(correction)

	quarantined := statusEvent("quarantined_"+tag, "msg_q_"+tag, domain.StatusDelivered, "", at(5))
	record(quarantined)
	require.NoError(t, s.Events.Quarantine(ctx, provider, quarantined.EventID, "Process", "value refused for "+address))

	// Refused webhook requests: one whose body names the address, one whose header does.
	require.NoError(t, s.Rejected.InsertRejected(ctx, []store.RejectedRequest{
		{Endpoint: "postscale", ReceivedAt: at(6), Cause: "bad_signature", Status: 401, Header: map[string][]string{},
			Body: fmt.Appendf(nil, `{"to":%q}`, strings.ToUpper(address))},
		{Endpoint: "postscale", ReceivedAt: at(6), Cause: "unparsable", Status: 400, Header: map[string][]string{"X-Original-To": {address}}},
	}, nil))

	// Recorded before 00009: the payloads in webhook_events, the body in notifications.
	legacy := fmt.Sprintf(`{"provider":%q,"event_id":"legacy_%s","kind":"status","recipient":%q,"raw":{"to":%q}}`, provider, tag, address, address)
	legacyIn := fmt.Sprintf(`{"provider":%q,"event_id":"legacy_in_%s","kind":"inbound","raw":{"from":%q}}`, provider, tag, address)
	_, err = s.Pool().Exec(ctx, `
INSERT INTO webhook_events (provider, event_id, event_type, payload, normalized, processed_at) VALUES
    ($1, 'legacy_' || $2, 'email.bounced', ($3::jsonb)->'raw', $3::jsonb, now()),
    ($1, 'legacy_in_' || $2, 'email.received', ($4::jsonb)->'raw', $4::jsonb, now())`,
		provider, tag, legacy, legacyIn)
	require.NoError(t, err)
	_, err = s.Pool().Exec(ctx, `
INSERT INTO notifications (id, provider, event_id, sink, type, status, body) VALUES
    ('ntf_legacy_' || $2, $1, 'legacy_' || $2, 'app', 'message.status_changed', 'sent', jsonb_build_object('data', jsonb_build_object('recipient', $3::text))),
    ('ntf_legacy_in_' || $2, $1, 'legacy_in_' || $2, 'app', 'email.received', 'sent', jsonb_build_object('data', $4::jsonb))`,
		provider, tag, address, legacyIn)
	require.NoError(t, err)
}

// Erasing an address leaves no trace of it in any text, varchar, json or jsonb column of any
// table (read from the catalog, so a table added later is held to it too), keeps it
// suppressed, touches nobody else's rows, and changes nothing the second time.
func TestEraseLeavesNoTraceAndKeepsTheSuppression(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewDatabase(t)
	s := storetest.OpenURL(t, dbURL, store.Options{ErasureHasher: erasureHasher(t)})
	ctx := t.Context()
	loadPerson(t, s, "jane", janeMixed)
	loadPerson(t, s, "bob", bobAddress)

	// Without a key, nothing is erased.
	_, err := storetest.OpenURL(t, dbURL, store.Options{}).Erase(ctx, store.ErasureRequest{Address: janeAddress, ErasedBy: "ops", Reason: "art. 17"})
	require.ErrorIs(t, err, store.ErrErasureNotConfigured)
	for _, bad := range []string{"example.com", "", "jane doe@example.com"} {
		_, err := s.Erase(ctx, store.ErasureRequest{Address: bad, ErasedBy: "ops"})
		require.ErrorIs(t, err, store.ErrInvalidAddress, "%q", bad)
	}

	hits, err := storetest.Hits(ctx, s.Pool(), janeAddress, janeInURL)
	require.NoError(t, err)
	require.NotEmpty(t, hits["event_payloads.payload"], "the test loads the address where erasure must find it: %v", hits)
	before, err := storetest.Snapshot(ctx, s.Pool())
	require.NoError(t, err)

	e, err := s.Erase(ctx, store.ErasureRequest{Address: " " + janeMixed, ErasedBy: "ops", Reason: "request from " + janeAddress + " of 1 May"})
	require.NoError(t, err)
	hash, _ := erasureHasher(t).Hash(janeAddress)
	assert.Equal(t, hash, e.AddressHash)
	assert.Equal(t, "request from [erased] of 1 May", e.Reason)
	assert.Equal(t, map[string]int64{
		"event_payloads":      5, // the inbound email (removed), the two bounces, the soft bounce, the correction
		"webhook_events":      3, // the two legacy rows, the quarantine error
		"notification_bodies": 2, // email.received (removed), status_changed
		"notifications":       3, // the two legacy bodies, the sink's error
		"messages":            3, // the three messages' recipients, the first one's diagnostic
		"message_events":      4, // bounce, soft bounce, second bounce (recipients, diagnostics), correction (note)
		"soft_bounces":        1,
		"rejected_requests":   2, // the body that named the address, the header that did
		"suppressions":        1,
		"suppression_lifts":   1,
	}, e.Counts)
	assert.Equal(t, int64(25), e.Total)
	var rejectedLeft int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM rejected_requests`).Scan(&rejectedLeft))
	assert.Equal(t, 2, rejectedLeft, "Bob's two refused requests stay; Jane's are gone (their bodies are bytes, which Hits does not read)")

	// No column of any table mentions the address any more, in either form.
	hits, err = storetest.Hits(ctx, s.Pool(), janeAddress, janeInURL)
	require.NoError(t, err)
	assert.Empty(t, hits, "columns that still mention the erased address")

	// It stays suppressed, found by the plain address.
	check, err := s.Suppressions.CheckSuppression(ctx, janeMixed, "marketing")
	require.NoError(t, err)
	assert.True(t, check.Suppressed)
	assert.Equal(t, []string{domain.ReasonHardBounce}, check.Reasons)
	sups, err := s.Suppressions.AddressSuppressions(ctx, janeAddress)
	require.NoError(t, err)
	require.Len(t, sups, 1)
	assert.Equal(t, hash, sups[0].Address)
	assert.Equal(t, "again_jane", sups[0].EventID)

	// Bob's rows, and every row that did not mention Jane, are as they were.
	mentions := func(_, row string) bool {
		return strings.Contains(strings.ToLower(row), janeAddress) || strings.Contains(strings.ToLower(row), janeInURL) ||
			strings.Contains(row, hex.EncodeToString([]byte(strings.ToUpper(janeAddress)))) // a refused request's body
	}
	after, err := storetest.Snapshot(ctx, s.Pool())
	require.NoError(t, err)
	assert.Empty(t, storetest.Missing(before, after, mentions), "rows that did not mention the address changed")
	check, err = s.Suppressions.CheckSuppression(ctx, bobAddress, "")
	require.NoError(t, err)
	assert.True(t, check.Suppressed)

	// Again: nothing left, nothing changed but a second audit row.
	e2, err := s.Erase(ctx, store.ErasureRequest{Address: janeAddress, ErasedBy: "ops", Reason: "repeated"})
	require.NoError(t, err)
	assert.Zero(t, e2.Total)
	for _, table := range store.ErasureTables {
		assert.Zero(t, e2.Counts[table], table)
	}
	again, err := storetest.Snapshot(ctx, s.Pool())
	require.NoError(t, err)
	erasures := func(table, _ string) bool { return table == "erasures" || table == "erasure_jobs" }
	assert.Empty(t, storetest.Missing(after, again, erasures))
	assert.Empty(t, storetest.Missing(again, after, erasures))
	assert.Len(t, again["erasures"], 2)

	// The inbound email is gone, its key kept (a re-delivery is still a duplicate); the bounce
	// can still be processed again, and finds no recipient.
	_, _, _, err = s.Events.StoredEvent(ctx, provider, "email.received:in_jane")
	require.ErrorIs(t, err, domain.ErrNoStoredEvent)
	res, err := s.Events.RecordEvent(ctx, domain.Event{Provider: provider, EventID: "email.received:in_jane", Type: "email.received", Kind: domain.KindInbound})
	require.NoError(t, err)
	assert.False(t, res.Inserted)
	ev, applied, _, err := s.Events.StoredEvent(ctx, provider, "bounce_jane")
	require.NoError(t, err)
	assert.Empty(t, ev.Recipient)
	assert.Empty(t, applied.Recipient)
	assert.Contains(t, string(ev.Raw), erasure.Placeholder)
	assert.Equal(t, "550 5.1.1 <[erased]>: user unknown", ev.Bounce.Diagnostic)
	m, err := s.Messages.GetMessage(ctx, provider, "msg_jane")
	require.NoError(t, err)
	assert.Empty(t, m.Recipient)
	assert.Equal(t, "[erased] confirmed receipt", m.Events[len(m.Events)-1].Note)

	// Lifting the erased address's suppression lifts its hashed row; the lift holds the hash.
	lift, err := s.Suppressions.LiftSuppression(ctx, janeAddress, suppression.GlobalScope, "ops", "asked again")
	require.NoError(t, err)
	assert.Equal(t, hash, lift.Address)
	check, err = s.Suppressions.CheckSuppression(ctx, janeAddress, "")
	require.NoError(t, err)
	assert.False(t, check.Suppressed)
}

// An address suppressed again after its erasure has a plain row beside its hashed one: both
// count, and a second erasure merges them into the hashed row.
func TestEraseMergesASuppressionAddedAfterAnErasure(t *testing.T) {
	t.Parallel()
	s := storetest.OpenWith(t, store.Options{ErasureHasher: erasureHasher(t)})
	ctx := t.Context()
	bounce := func(id string, at time.Time) {
		t.Helper()
		ev := statusEvent(id, "msg_"+id, domain.StatusBounced, domain.BounceHard, at)
		ev.Recipient = janeAddress
		_, err := s.Events.RecordEvent(ctx, ev)
		require.NoError(t, err)
		_, err = s.Events.ApplyStatus(ctx, ev, rules)
		require.NoError(t, err)
	}
	bounce("b1", at(10))
	_, err := s.Erase(ctx, store.ErasureRequest{Address: janeAddress, ErasedBy: "ops"})
	require.NoError(t, err)
	bounce("b2", at(0))

	sups, err := s.Suppressions.AddressSuppressions(ctx, janeAddress)
	require.NoError(t, err)
	require.Len(t, sups, 2)
	assert.Equal(t, janeAddress, sups[0].Address, "the address's own row first")
	check, err := s.Suppressions.CheckSuppression(ctx, janeAddress, "")
	require.NoError(t, err)
	assert.Equal(t, []string{domain.ReasonHardBounce}, check.Reasons, "each reason once")

	e, err := s.Erase(ctx, store.ErasureRequest{Address: janeAddress, ErasedBy: "ops"})
	require.NoError(t, err)
	assert.Equal(t, int64(1), e.Counts["suppressions"])
	sups, err = s.Suppressions.AddressSuppressions(ctx, janeAddress)
	require.NoError(t, err)
	require.Len(t, sups, 1)
	assert.Equal(t, e.AddressHash, sups[0].Address)
	assert.Equal(t, "b1", sups[0].EventID, "the hashed row keeps its cause")
	assert.Equal(t, int64(2), sups[0].TimesSeen)
	assert.True(t, sups[0].FirstSeen.Equal(at(0)) && sups[0].LastSeen.Equal(at(10)), "the window covers both: %v %v", sups[0].FirstSeen, sups[0].LastSeen)
}

// Through a transaction-mode pooler the store runs every query in QueryExecModeExec, where pgx
// types each parameter by its Go type (Options.TransactionPooler): the erasure's arrays, keys and
// jsonb texts must go as PostgreSQL expects them there too.
func TestEraseInExecMode(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewDatabase(t)
	s := storetest.OpenURL(t, dbURL, store.Options{TransactionPooler: true, ErasureHasher: erasureHasher(t)})
	loadPerson(t, s, "jane", janeMixed)

	e, err := s.Erase(t.Context(), store.ErasureRequest{Address: janeAddress, ErasedBy: "ops", Reason: "exec mode"})
	require.NoError(t, err)
	assert.Equal(t, int64(25), e.Total)
	hits, err := storetest.Hits(t.Context(), s.Pool(), janeAddress, janeInURL)
	require.NoError(t, err)
	assert.Empty(t, hits)
	check, err := s.Suppressions.CheckSuppression(t.Context(), janeAddress, "")
	require.NoError(t, err)
	assert.True(t, check.Suppressed)
}

// On a database whose locale is C, lower() folds only ASCII letters: an erasure must still find
// "JÖRG.Müller@Bücher.example" when asked for jörg.müller@bücher.example (issue 25: it missed
// non-ASCII upper case there).
func TestEraseFindsNonASCIIUpperCaseOnACLocaleDatabase(t *testing.T) {
	t.Parallel()
	s := storetest.OpenCLocale(t, store.Options{ErasureHasher: erasureHasher(t)})
	ctx := t.Context()
	const spelled, asked = "JÖRG.Müller@Bücher.example", "jörg.müller@bücher.example"
	var ctype string
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT datctype FROM pg_database WHERE datname = current_database()`).Scan(&ctype))
	require.Equal(t, "C", ctype)
	loadPerson(t, s, "jorg", spelled)
	local, domainPart, _ := strings.Cut(spelled, "@")
	// ILIKE folds only ASCII here too: look for each spelling the data holds.
	needles := []string{spelled, strings.ToUpper(spelled), asked, local + "%40" + domainPart}
	hits, err := storetest.Hits(ctx, s.Pool(), needles...)
	require.NoError(t, err)
	require.NotEmpty(t, hits["event_payloads.payload"])

	e, err := s.Erase(ctx, store.ErasureRequest{Address: asked, ErasedBy: "ops", Reason: "art. 17"})
	require.NoError(t, err)
	assert.Equal(t, int64(25), e.Total, "%v", e.Counts)
	hits, err = storetest.Hits(ctx, s.Pool(), needles...)
	require.NoError(t, err)
	assert.Empty(t, hits, "columns that still mention the erased address")
	check, err := s.Suppressions.CheckSuppression(ctx, spelled, "")
	require.NoError(t, err)
	assert.True(t, check.Suppressed)
}

// Erasing a mailbox of yours that customers wrote to (support@…) would remove every customer's
// email to it: refused, with what it would change, unless forced; a dry run changes nothing
// whatever it is asked; the inbound scope removes only the inbound emails (issue 25).
func TestEraseOfASharedInboundAddress(t *testing.T) {
	t.Parallel()
	s := storetest.OpenWith(t, store.Options{ErasureHasher: erasureHasher(t)})
	ctx := t.Context()
	loadPerson(t, s, "jane", janeAddress)
	loadPerson(t, s, "bob", bobAddress)
	const support = "Support@App.example"
	// A bounce of mail sent to the mailbox too: the "all" scope redacts it, "inbound" does not.
	bounce := statusEvent("bounce_support", "msg_support", domain.StatusBounced, domain.BounceHard, at(9))
	bounce.Recipient = support
	_, err := s.Events.RecordEvent(ctx, bounce)
	require.NoError(t, err)
	_, err = s.Events.ApplyStatus(ctx, bounce, rules)
	require.NoError(t, err)

	unchanged := func(before map[string][]string, what string) {
		t.Helper()
		after, err := storetest.Snapshot(ctx, s.Pool())
		require.NoError(t, err)
		jobs := func(table, _ string) bool { return table == "erasure_jobs" } // the refused job's record
		assert.Empty(t, storetest.Missing(before, after, jobs), what)
		assert.Empty(t, storetest.Missing(after, before, jobs), what)
	}
	before, err := storetest.Snapshot(ctx, s.Pool())
	require.NoError(t, err)

	_, err = s.Erase(ctx, store.ErasureRequest{Address: support, ErasedBy: "ops", Reason: "mailbox closed"})
	var shared *store.SharedAddressError
	require.ErrorAs(t, err, &shared)
	require.ErrorIs(t, err, store.ErrSharedAddress)
	assert.Equal(t, int64(2), shared.Would.InboundTo, "jane's and bob's emails to it")
	assert.NotContains(t, err.Error(), "pp.example")
	unchanged(before, "a refused erasure changes nothing")

	dry, err := s.Erase(ctx, store.ErasureRequest{Address: support, ErasedBy: "ops", Reason: "mailbox closed", DryRun: true})
	require.NoError(t, err)
	assert.True(t, dry.DryRun)
	assert.Zero(t, dry.ID)
	assert.Equal(t, int64(2), dry.InboundTo)
	assert.Equal(t, map[string]int64{"event_payloads": 3, "notification_bodies": 2, "webhook_events": 0, "notifications": 0,
		"messages": 1, "message_events": 1, "soft_bounces": 0, "rejected_requests": 0, "suppressions": 1, "suppression_lifts": 0}, dry.Counts,
		"their two inbound emails and the bounce, the emails' notifications, the bounced message")
	unchanged(before, "a dry run changes nothing, and records no erasure")

	_, err = s.Erase(ctx, store.ErasureRequest{Address: support, ErasedBy: "ops", Scope: "everything"})
	require.ErrorIs(t, err, store.ErrInvalidErasureScope)

	in, err := s.Erase(ctx, store.ErasureRequest{Address: support, ErasedBy: "ops", Reason: "mailbox closed", Scope: store.ErasureScopeInbound})
	require.NoError(t, err)
	assert.Equal(t, store.ErasureScopeInbound, in.Scope)
	assert.Equal(t, map[string]int64{"event_payloads": 2, "notification_bodies": 2, "webhook_events": 0, "notifications": 0,
		"messages": 0, "message_events": 0, "soft_bounces": 0, "rejected_requests": 0, "suppressions": 0, "suppression_lifts": 0}, in.Counts)
	for _, id := range []string{"email.received:in_jane", "email.received:in_bob"} {
		_, _, _, err = s.Events.StoredEvent(ctx, provider, id)
		require.ErrorIs(t, err, domain.ErrNoStoredEvent, id)
	}
	m, err := s.Messages.GetMessage(ctx, provider, "msg_support")
	require.NoError(t, err)
	assert.Equal(t, support, m.Recipient, "the inbound scope leaves the rest alone")

	forced, err := s.Erase(ctx, store.ErasureRequest{Address: support, ErasedBy: "ops", Reason: "mailbox closed", Force: true})
	require.NoError(t, err)
	assert.Zero(t, forced.InboundTo, "its inbound emails were already gone")
	m, err = s.Messages.GetMessage(ctx, provider, "msg_support")
	require.NoError(t, err)
	assert.Empty(t, m.Recipient)
	// Jane's and Bob's own data did not go with the mailbox.
	for _, who := range []string{janeAddress, bobAddress} {
		c, err := s.Suppressions.CheckSuppression(ctx, who, "")
		require.NoError(t, err)
		assert.True(t, c.Suppressed, who)
	}
}

// A phase of an erasure job goes on from the job's cursor: stopped after a few batches (its
// activity canceled, its worker gone), the next call resumes where the last committed batch left
// it, opening the address sealed in the job. A runner whose cursor is stale (an attempt that
// outlived its timeout while another ran the phase) commits nothing. The job ends with exactly the
// counts a dry run found, each row written once, and one audit row (issue 39).
func TestErasurePhaseGoesOnFromItsCursorAndNeverTwice(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewDatabase(t)
	s := storetest.OpenURL(t, dbURL, store.Options{ErasureHasher: erasureHasher(t)})
	ctx := t.Context()
	require.NoError(t, storetest.LoadErasureBench(ctx, s, s.Pool(), 20_000))
	small := domain.PhaseOptions{BatchBlocks: 16}
	req := store.ErasureRequest{Address: storetest.ErasureBenchAddress, ErasedBy: "ops", Reason: "art. 17"}
	dry := req
	dry.DryRun = true
	want, err := s.EraseWith(ctx, dry, small)
	require.NoError(t, err)
	require.Equal(t, int64(4), want.Counts["event_payloads"], "%v", want.Counts)
	storetest.CountWrites(t, ctx, s.Pool())

	job, err := s.Erasures.StartErasure(ctx, req)
	require.NoError(t, err)
	var sealed []byte
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT sealed_address FROM erasure_jobs WHERE id = $1`, job.ID).Scan(&sealed))
	assert.NotContains(t, string(sealed), "target", "the job keeps the address sealed, never plain")

	// Stopped after three batches of the check.
	stop, cancel := context.WithCancel(ctx)
	batches := 0
	_, _, err = s.Erasures.ErasurePhase(stop, job.ID, "check", domain.PhaseOptions{BatchBlocks: 16, Progress: func(domain.ErasureJob) {
		if batches++; batches == 3 {
			cancel()
		}
	}})
	require.ErrorIs(t, err, context.Canceled)
	job, err = s.Erasures.ErasureJob(ctx, job.ID)
	require.NoError(t, err)
	assert.Equal(t, store.ErasureRunning, job.Status)
	assert.Equal(t, int64(3), job.Batches)
	assert.Equal(t, "check", job.Phase)

	// Out of time before a batch: nothing done, more to do.
	job, more, err := s.Erasures.ErasurePhase(ctx, job.ID, "check", domain.PhaseOptions{BatchBlocks: 16, Until: time.Now().Add(-time.Second)})
	require.NoError(t, err)
	assert.True(t, more)
	assert.Equal(t, int64(3), job.Batches)

	// The event_payloads step, whose runner finds after its first batch that another ran the
	// whole phase meanwhile: its next batch is refused, and rolled back.
	phases := []string{"check", "check:webhook_events"}
	for _, p := range phases {
		job, more, err = s.Erasures.ErasurePhase(ctx, job.ID, p, small)
		require.NoError(t, err)
		require.False(t, more)
	}
	ran := false
	_, _, err = s.Erasures.ErasurePhase(ctx, job.ID, "event_payloads", domain.PhaseOptions{BatchBlocks: 16, Progress: func(domain.ErasureJob) {
		if !ran {
			ran = true
			_, _, err := s.Erasures.ErasurePhase(ctx, job.ID, "event_payloads", small)
			require.NoError(t, err)
		}
	}})
	require.ErrorIs(t, err, store.ErrErasureMoved)

	// A phase the cursor is past does nothing; the rest of the job runs to its end.
	before, err := s.Erasures.ErasureJob(ctx, job.ID)
	require.NoError(t, err)
	after, _, err := s.Erasures.ErasurePhase(ctx, job.ID, "check", small)
	require.NoError(t, err)
	assert.Equal(t, before.Batches, after.Batches)
	e, err := s.EraseWith(ctx, req, small) // joins the job
	require.NoError(t, err)
	assert.Equal(t, job.ID, e.JobID)
	assert.Equal(t, want.Counts, e.Counts, "the resumed job's counts are the dry run's")
	assert.Equal(t, want.Counts, storetest.Writes(t, ctx, s.Pool()), "each row changed once")
	job, err = s.Erasures.ErasureJob(ctx, job.ID)
	require.NoError(t, err)
	assert.Equal(t, store.ErasureDone, job.Status)
	assert.Greater(t, job.Batches, int64(10), "a batch reads 16 pages: the job took many")
	var n int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM erasure_jobs WHERE sealed_address IS NOT NULL`).Scan(&n))
	assert.Zero(t, n, "a job that ended holds no address, not even sealed")
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM erasures`).Scan(&n))
	assert.Equal(t, 1, n, "one audit row")
	hits, err := storetest.Hits(ctx, s.Pool(), storetest.ErasureBenchAddress, "target%40example.com")
	require.NoError(t, err)
	assert.Empty(t, hits)

	// A job whose seal no longer opens (the hash key changed) fails, and drops the seal.
	other, err := erasure.NewHasher(bytes.Repeat([]byte("o"), erasure.MinKeyBytes))
	require.NoError(t, err)
	job, err = s.Erasures.StartErasure(ctx, req)
	require.NoError(t, err)
	_, _, err = storetest.OpenURL(t, dbURL, store.Options{ErasureHasher: other}).Erasures.ErasurePhase(ctx, job.ID, "check", small)
	require.ErrorIs(t, err, domain.ErrErasureFailed)
	_, err = s.Erasures.ErasureOutcome(ctx, job.ID)
	require.ErrorContains(t, err, "failed")

	// Asked again while nothing runs: a new job, nothing left.
	again, err := s.EraseWith(ctx, req, small)
	require.NoError(t, err)
	assert.Zero(t, again.Total)
}

// A job that a version before the workflows left running (its lease columns set) keeps its
// cursor, counts and sealed address across the migration that drops the lease, so a worker
// can go on with it (workflows' TestErasureJobLeftByAnOlderVersionCompletes runs it there).
func TestMigrationKeepsAJobLeftRunning(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewEmptyDatabase(t)
	ctx := t.Context()
	require.NoError(t, store.MigrateTo(ctx, dbURL, 18))
	db := storetest.NewPool(t, dbURL)
	h := erasureHasher(t)
	hash, err := h.Hash(janeAddress)
	require.NoError(t, err)
	sealed, err := h.Seal(janeAddress, []byte(hash))
	require.NoError(t, err)
	var id int64
	require.NoError(t, db.QueryRow(ctx, `
INSERT INTO erasure_jobs (address_hash, scope, force, dry_run, erased_by, reason, status, sealed_address, counts,
                          phase, relation, next_block, batches, claimed_by, claimed_until)
VALUES ($1, 'all', false, false, 'ops', 'art. 17', 'running', $2, '{"event_payloads": 2}', 'event_payloads',
        'event_payloads_p20261101', 4096, 7, 'dead-process', now() + interval '1 minute')
RETURNING id`, hash, sealed).Scan(&id))
	require.NoError(t, store.Migrate(ctx, dbURL))
	s := storetest.OpenURL(t, dbURL, store.Options{ErasureHasher: h})
	ids, err := s.Erasures.RunningErasureJobs(ctx)
	require.NoError(t, err)
	assert.Equal(t, []int64{id}, ids)
	job, err := s.Erasures.ErasureJob(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, "event_payloads", job.Phase)
	assert.Equal(t, "event_payloads_p20261101", job.CursorRelation)
	assert.Equal(t, int64(4096), job.CursorBlock)
	assert.Equal(t, int64(2), job.Counts["event_payloads"])
	assert.Equal(t, int64(7), job.Batches)
	var columns int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns
		WHERE table_name = 'erasure_jobs' AND column_name IN ('claimed_by', 'claimed_until')`).Scan(&columns))
	assert.Zero(t, columns, "the lease's columns are gone")
}

// An open's client IP address is the opener's: erasing the address takes it from the stored
// event, the provider's JSON (an IPv6 literal inside a nested JSON string too, as SES's Message
// is) and the notification that carried it to an engagement_ip sink. Another person's open
// keeps its IP.
func TestEraseTakesTheEngagementIPWithTheAddress(t *testing.T) {
	t.Parallel()
	s := storetest.OpenURL(t, storetest.NewDatabase(t), store.Options{ErasureHasher: erasureHasher(t)})
	ctx := t.Context()
	open := func(tag, address, ip, ip6 string) domain.Event {
		ev := domain.Event{Provider: provider, EventID: "open_" + tag, Type: "email.opened", Kind: domain.KindOpened,
			MessageID: "msg_open_" + tag, Recipient: address, OccurredAt: at(0),
			Engagement: &domain.Engagement{UserAgent: "Mail/1.0", IP: ip},
			Raw: json.RawMessage(fmt.Sprintf(`{"type":"email.opened","data":{"to":%q,"ip_address":%q},"Message":%q}`,
				address, ip, fmt.Sprintf(`{"open":{"ipAddress":%q,"timestamp":"2026-12-06T10:32:33.936Z"}}`, ip6)))}
		_, err := s.Events.RecordEvent(ctx, ev)
		require.NoError(t, err)
		_, err = s.Notifications.EnsureNotification(ctx, delivery.Notification{Provider: provider, EventID: ev.EventID, Sink: "analytics",
			Type: domain.TypeMessageOpened,
			Body: json.RawMessage(fmt.Sprintf(`{"type":"message.opened","data":{"recipient":%q,"ip":%q,"user_agent":"Mail/1.0"}}`, address, ip))})
		require.NoError(t, err)
		return ev
	}
	open("jane", janeAddress, "203.0.113.7", "2001:db8::7")
	open("bob", bobAddress, "198.51.100.9", "2001:db8::9")

	_, err := s.Erase(ctx, store.ErasureRequest{Address: janeAddress, ErasedBy: "ops", Reason: "art. 17"})
	require.NoError(t, err)

	hits, err := storetest.Hits(ctx, s.Pool(), "203.0.113.7", "2001:db8::7")
	require.NoError(t, err)
	assert.Empty(t, hits, "columns that still hold the erased person's IP addresses")
	ev, _, _, err := s.Events.StoredEvent(ctx, provider, "open_jane")
	require.NoError(t, err)
	require.NotNil(t, ev.Engagement, "the rest of the engagement stays")
	assert.Empty(t, ev.Engagement.IP)
	assert.Equal(t, "Mail/1.0", ev.Engagement.UserAgent)
	assert.Contains(t, string(ev.Raw), "2026-12-06T10:32:33.936Z", "a time of day is not an IP address")

	hits, err = storetest.Hits(ctx, s.Pool(), "198.51.100.9", "2001:db8::9")
	require.NoError(t, err)
	assert.Equal(t, 1, hits["event_payloads.payload"], "Bob's open keeps its IPs: %v", hits)
	assert.Equal(t, 1, hits["notification_bodies.body"], "Bob's notification keeps its IP: %v", hits)
	bob, _, _, err := s.Events.StoredEvent(ctx, provider, "open_bob")
	require.NoError(t, err)
	assert.Equal(t, "198.51.100.9", bob.Engagement.IP)
}
