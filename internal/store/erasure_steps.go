package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/erasure"
)

// An erasure's steps, one per table of ErasureTables, each run over one block range of one
// relation (the table, or one partition of it) per batch: its candidate query reads only the
// pages [lo, hi) (a TID range scan), selects the rows whose lower-cased text matches the
// matcher's LIKE patterns, and locks them; Go decides and queues the changes, sent by flush in
// the batch's transaction. A row that an update moves to a later page may be read again: it no
// longer mentions the address, so nothing changes twice.

// step is one table's part of an erasure.
type step struct {
	table string
	// run reads one block range of rel and queues its changes.
	run func(w *eraser, ctx context.Context, rel string, lo, hi int64) error
	// inbound says the step has something to do for ErasureScopeInbound.
	inbound bool
}

// erasureSteps are the steps, by table (erasure.Plan orders them).
var erasureSteps = []step{
	{"event_payloads", (*eraser).payloads, true},
	{"webhook_events", (*eraser).events, true},
	{"notification_bodies", (*eraser).bodies, true},
	{"notifications", (*eraser).notifications, true},
	{"messages", (*eraser).messages, false},
	{"message_events", (*eraser).messageEvents, false},
	{"soft_bounces", (*eraser).softBounces, false},
	{"suppressions", (*eraser).suppressions, false},
	{"suppression_lifts", (*eraser).lifts, false},
	{"rejected_requests", (*eraser).rejectedRequests, true},
}

// eraser finds one batch's rows and queues their changes, sent in one batch by flush.
type eraser struct {
	tx     pgx.Tx
	m      *erasure.Matcher
	hasher erasure.Hasher
	likes  []string // erasure.Matcher.LikePatterns: what the candidate queries select

	// inboundOnly keeps the erasure to inbound emails and their notification bodies
	// (ErasureScopeInbound).
	inboundOnly bool
	// inboundTo counts the inbound emails sent to the address among those removed.
	inboundTo int64

	// open opens a body kept through the payload codec (db.openBody).
	open func([]byte) ([]byte, bool)

	batch  pgx.Batch
	tables []string // the table of each queued statement
	counts map[string]int64
}

// change queues the statement that changes one row of table.
func (w *eraser) change(table, sql string, args ...any) {
	w.batch.Queue(sql, args...)
	w.tables = append(w.tables, table)
	w.counts[table]++
}

// flush sends the queued changes. Each one names a row its candidate query locked, so each
// must change exactly one.
func (w *eraser) flush(ctx context.Context) (err error) {
	if w.batch.Len() == 0 {
		return nil
	}
	br := w.tx.SendBatch(ctx, &w.batch)
	defer func() {
		if cerr := br.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("write: %w", cerr)
		}
	}()
	for _, table := range w.tables {
		tag, err := br.Exec()
		if err != nil {
			return fmt.Errorf("write %s: %w", table, err)
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("write %s: %d rows changed, want 1", table, tag.RowsAffected())
		}
	}
	return nil
}

// candidates runs a step's candidate query over the pages [lo, hi) of rel: sql has %s for the
// relation, $1 for the patterns, $2 and $3 for the range's bounds, and its own arguments from
// $4. each is called for every row, with scan's destinations filled.
func (w *eraser) candidates(ctx context.Context, rel, sql string, lo, hi int64, scan []any, each func() error, args ...any) error {
	rows, err := w.tx.Query(ctx, fmt.Sprintf(sql, rel), append([]any{w.likes, tid(lo), tid(hi)}, args...)...)
	if err == nil {
		_, err = pgx.ForEachRow(rows, scan, each)
	}
	if err != nil {
		return fmt.Errorf("find in %s: %w", rel, err)
	}
	return nil
}

// tid is the first tuple of a page, as PostgreSQL writes a tid.
func tid(block int64) string { return fmt.Sprintf("(%d,0)", block) }

// redactJSON is RedactJSON (or RedactEvent) of a jsonb column's text, nil for SQL NULL; the
// result goes back as text.
func (w *eraser) redactJSON(doc []byte, event bool) (any, bool, error) {
	if doc == nil {
		return nil, false, nil
	}
	redact := w.m.RedactJSON
	if event {
		redact = w.m.RedactEvent
	}
	out, changed, err := redact(doc)
	if err != nil {
		return nil, false, err
	}
	return string(out), changed, nil
}

// redactIPs is erasure.RedactIPs of what redactJSON gave (text, or nil for SQL NULL), for a row
// known to be about the erased person; changed is whether redactJSON changed it already.
func (w *eraser) redactIPs(doc any, changed bool) (any, bool, error) {
	text, ok := doc.(string)
	if !ok {
		return doc, changed, nil
	}
	out, c, err := erasure.RedactIPs([]byte(text))
	if err != nil {
		return nil, false, err
	}
	return string(out), changed || c, nil
}

// redactText is RedactText of a nullable text column.
func (w *eraser) redactText(s *string) (*string, bool) {
	if s == nil {
		return nil, false
	}
	out, changed := w.m.RedactText(*s)
	return &out, changed
}

// countInboundTo counts a removed inbound email that was sent to the address: a mailbox of
// yours, not a person writing to it.
func (w *eraser) countInboundTo(recipient string) {
	if recipient != "" && w.m.Mentions(recipient) {
		w.inboundTo++
	}
}

// clearRecipient empties a recipient that mentions the address.
func (w *eraser) clearRecipient(s string) (string, bool) {
	if w.m.Mentions(s) {
		return "", true
	}
	return s, false
}

// eventID is the key a row's event id gets: the current form of a prior version's key that
// holds the address (erasure.Matcher.EventID, with true), or the id as it is.
func (w *eraser) eventID(provider, id string) (string, bool) {
	if current, ok := w.m.EventID(provider, id); ok {
		return current, true
	}
	return id, false
}

// messageID is eventID for a message key.
func (w *eraser) messageID(provider, id string) (string, bool) {
	if current, ok := w.m.MessageID(provider, id); ok {
		return current, true
	}
	return id, false
}

func (w *eraser) payloads(ctx context.Context, rel string, lo, hi int64) error {
	var (
		provider, eventID, recipient string
		receivedAt                   time.Time
		payload, event               []byte
		inbound                      bool
	)
	return w.candidates(ctx, rel, qErasePayloads, lo, hi, []any{&provider, &eventID, &receivedAt, &payload, &event, &inbound, &recipient}, func() error {
		if w.inboundOnly && !inbound {
			return nil
		}
		newPayload, pc, err := w.redactJSON(payload, false)
		if err == nil && w.m.Mentions(recipient) {
			newPayload, pc, err = w.redactIPs(newPayload, pc)
		}
		if err != nil {
			return fmt.Errorf("payload of %s:%s: %w", provider, eventID, err)
		}
		newEvent, ec, err := w.redactJSON(event, true)
		if err != nil {
			return fmt.Errorf("event of %s:%s: %w", provider, eventID, err)
		}
		newID, kc := w.eventID(provider, eventID)
		switch {
		case !pc && !ec && !kc:
		case inbound:
			w.countInboundTo(recipient)
			w.change("event_payloads", qEraseDeletePayload, provider, eventID, receivedAt)
		default:
			w.change("event_payloads", qEraseUpdatePayload, provider, eventID, receivedAt, newPayload, newEvent, newID)
		}
		return nil
	}, string(domain.KindInbound))
}

func (w *eraser) events(ctx context.Context, rel string, lo, hi int64) error {
	var (
		provider, eventID, recipient, messageID string
		payload, normalized                     []byte
		inbound                                 bool
		relayError, quarantined                 *string
	)
	return w.candidates(ctx, rel, qEraseEvents, lo, hi, []any{&provider, &eventID, &payload, &normalized, &inbound, &recipient, &relayError, &quarantined, &messageID}, func() error {
		if w.inboundOnly && !inbound {
			return nil
		}
		newPayload, pc, err := w.redactJSON(payload, false)
		if err == nil && w.m.Mentions(recipient) {
			newPayload, pc, err = w.redactIPs(newPayload, pc)
		}
		if err != nil {
			return fmt.Errorf("legacy payload of %s:%s: %w", provider, eventID, err)
		}
		newNormalized, nc, err := w.redactJSON(normalized, true)
		if err != nil {
			return fmt.Errorf("legacy event of %s:%s: %w", provider, eventID, err)
		}
		if (pc || nc) && inbound {
			w.countInboundTo(recipient)
			newPayload, newNormalized = nil, nil
		}
		newRelay, rc := w.redactText(relayError)
		newQuarantine, qc := w.redactText(quarantined)
		if w.inboundOnly {
			newRelay, rc, newQuarantine, qc = relayError, false, quarantined, false
		}
		newID, kc := w.eventID(provider, eventID)
		newMessage, mc := w.messageID(provider, messageID)
		if w.inboundOnly {
			newID, kc, newMessage, mc = eventID, false, messageID, false
		}
		if pc || nc || rc || qc || kc || mc {
			w.change("webhook_events", qEraseUpdateEvent, provider, eventID, newPayload, newNormalized, newRelay, newQuarantine, newID, newMessage)
		}
		return nil
	}, string(domain.KindInbound))
}

func (w *eraser) bodies(ctx context.Context, rel string, lo, hi int64) error {
	var (
		id        string
		createdAt time.Time
		body      []byte
		inbound   bool
	)
	return w.candidates(ctx, rel, qEraseBodies, lo, hi, []any{&id, &createdAt, &body, &inbound}, func() error {
		newBody, changed, err := w.redactJSON(body, false)
		if err == nil && changed && !inbound {
			// It names the address: it is about that person (a status change, a suppression,
			// an engagement), and an IP address in it is theirs.
			newBody, changed, err = w.redactIPs(newBody, changed)
		}
		switch {
		case err != nil:
			return fmt.Errorf("body of notification %s: %w", id, err)
		case !changed, w.inboundOnly && !inbound:
		case inbound:
			w.change("notification_bodies", qEraseDeleteBody, id, createdAt)
		default:
			w.change("notification_bodies", qEraseUpdateBody, id, createdAt, newBody)
		}
		return nil
	}, domain.TypeEmailReceived)
}

func (w *eraser) notifications(ctx context.Context, rel string, lo, hi int64) error {
	var (
		id, typ, provider, eventID, messageID string
		body                                  []byte
		lastError                             *string
	)
	return w.candidates(ctx, rel, qEraseNotifications, lo, hi, []any{&id, &typ, &body, &lastError, &provider, &eventID, &messageID}, func() error {
		newBody, bc, err := w.redactJSON(body, false)
		if err == nil && bc && typ != domain.TypeEmailReceived {
			newBody, bc, err = w.redactIPs(newBody, bc) // as in bodies
		}
		if err != nil {
			return fmt.Errorf("legacy body of notification %s: %w", id, err)
		}
		if bc && typ == domain.TypeEmailReceived {
			newBody = nil
		}
		newError, ec := w.redactText(lastError)
		newID, kc := w.eventID(provider, eventID)
		newMessage, mc := w.messageID(provider, messageID)
		if w.inboundOnly {
			bc = bc && typ == domain.TypeEmailReceived
			newError, ec = lastError, false
			newID, kc, newMessage, mc = eventID, false, messageID, false
			if !bc {
				newBody = body
			}
		}
		if bc || ec || kc || mc {
			w.change("notifications", qEraseUpdateNotification, id, newBody, newError, newID, newMessage)
		}
		return nil
	})
}

func (w *eraser) messages(ctx context.Context, rel string, lo, hi int64) error {
	var provider, messageID, recipient, diagnostic, orderEventID string
	return w.candidates(ctx, rel, qEraseMessages, lo, hi, []any{&provider, &messageID, &recipient, &diagnostic, &orderEventID}, func() error {
		r, rc := w.clearRecipient(recipient)
		d, dc := w.m.RedactText(diagnostic)
		newMessage, mc := w.messageID(provider, messageID)
		newOrder, oc := w.eventID(provider, orderEventID)
		if rc || dc || mc || oc {
			w.change("messages", qEraseUpdateMessage, provider, messageID, r, d, newMessage, newOrder)
		}
		return nil
	})
}

func (w *eraser) messageEvents(ctx context.Context, rel string, lo, hi int64) error {
	var provider, eventID, recipient, diagnostic, note, messageID string
	return w.candidates(ctx, rel, qEraseMessageEvents, lo, hi, []any{&provider, &eventID, &recipient, &diagnostic, &note, &messageID}, func() error {
		r, rc := w.clearRecipient(recipient)
		d, dc := w.m.RedactText(diagnostic)
		n, nc := w.m.RedactText(note)
		newID, kc := w.eventID(provider, eventID)
		newMessage, mc := w.messageID(provider, messageID)
		if rc || dc || nc || kc || mc {
			w.change("message_events", qEraseUpdateMessageEvent, provider, eventID, r, d, n, newID, newMessage)
		}
		return nil
	})
}

func (w *eraser) softBounces(ctx context.Context, rel string, lo, hi int64) error {
	var provider, eventID, address string
	return w.candidates(ctx, rel, qEraseSoftBounces, lo, hi, []any{&provider, &eventID, &address}, func() error {
		if w.m.Mentions(address) {
			w.change("soft_bounces", qEraseDeleteSoftBounce, provider, eventID)
		}
		return nil
	})
}

// rejectedRequests deletes the refused webhook requests that mention the address (an inbound
// email refused is one too): a refused request is kept for diagnosis, not redacted. The body is
// bytes, which PostgreSQL cannot lower as text: the query takes as candidates the bodies that
// match as ASCII (encode(…, 'escape')) and every body with a non-ASCII byte (escaped with a
// backslash), and Go decides on the bytes as they are.
func (w *eraser) rejectedRequests(ctx context.Context, rel string, lo, hi int64) error {
	var (
		id              int64
		body            []byte
		headers, reason string
		sealed          bool
	)
	return w.candidates(ctx, rel, qEraseRejected, lo, hi, []any{&id, &body, &headers, &reason, &sealed}, func() error {
		unreadable := false
		if sealed && body != nil {
			// Kept through the payload codec: judged on the body it opens to. One no key opens
			// any more cannot be cleared of the address, so it goes.
			body, unreadable = w.open(body)
		}
		if unreadable || w.m.Mentions(string(body)) || w.m.Mentions(headers) || w.m.Mentions(reason) {
			w.change("rejected_requests", qEraseDeleteRejected, id)
		}
		return nil
	})
}

// suppressions re-keys each row of the address under its hash, merging it into a row the hash
// already has in that scope (an address suppressed again after an earlier erasure).
func (w *eraser) suppressions(ctx context.Context, rel string, lo, hi int64) error {
	var address, scope, provider, eventID, messageID string
	var folded bool
	return w.candidates(ctx, rel, qEraseSuppressions, lo, hi, []any{&address, &scope, &provider, &eventID, &messageID, &folded}, func() error {
		// A folded row (an older version's key, migration 20) under the key that version gave
		// the address may be its: it goes too, under its own hash, which the check for every
		// address it suppressed still finds (Suppressions.keysOf).
		if !w.m.Mentions(address) && !(folded && w.m.FoldedKey(address)) {
			return nil
		}
		hash, err := w.hasher.Hash(address)
		if err != nil {
			return err
		}
		newID, _ := w.eventID(provider, eventID)
		newMessage, _ := w.messageID(provider, messageID)
		w.change("suppressions", qEraseMoveSuppression, address, scope, hash, newID, newMessage)
		return nil
	})
}

func (w *eraser) lifts(ctx context.Context, rel string, lo, hi int64) error {
	var (
		id                                              int64
		address, liftReason, provider, eventID, message string
	)
	return w.candidates(ctx, rel, qEraseLifts, lo, hi, []any{&id, &address, &liftReason, &provider, &eventID, &message}, func() error {
		newAddress, ac := address, w.m.Mentions(address)
		if ac {
			var err error
			if newAddress, err = w.hasher.Hash(address); err != nil {
				return err
			}
		}
		newReason, rc := w.m.RedactText(liftReason)
		newID, kc := w.eventID(provider, eventID)
		newMessage, mc := w.messageID(provider, message)
		if ac || rc || kc || mc {
			w.change("suppression_lifts", qEraseUpdateLift, id, newAddress, newReason, newID, newMessage)
		}
		return nil
	})
}

// countInboundIn counts, in one block range of a payload relation or of webhook_events, the inbound
// emails sent to the address: the check a job makes before it changes anything (see
// ErrSharedAddress). It locks nothing.
func (w *eraser) countInboundIn(ctx context.Context, rel, sql string, lo, hi int64) error {
	var recipient string
	return w.candidates(ctx, rel, sql, lo, hi, []any{&recipient}, func() error {
		w.countInboundTo(recipient)
		return nil
	}, string(domain.KindInbound))
}

// SQL of the steps. %s is the relation (a table, or a partition of event_payloads or
// notification_bodies: FROM ONLY, so a partitioned parent is never scanned whole), $1 the
// matcher's patterns (lower-case LIKE patterns, matched against lower(column): lowering a value
// once costs a third of what ILIKE, which lowers it for each pattern, does), $2 and $3 the
// block range. FOR UPDATE holds each candidate until the batch commits, so what is decided in Go
// is still what is written.
const (
	qErasePayloads = `
SELECT provider, event_id, received_at, payload::text, event::text, COALESCE(event->>'kind' = $4, false),
       COALESCE(event->>'recipient', '')
FROM ONLY %s
WHERE ctid >= $2::tid AND ctid < $3::tid
  AND (lower(payload::text) LIKE ANY($1) OR lower(event::text) LIKE ANY($1) OR lower(event_id) LIKE ANY($1))
FOR UPDATE`

	qEraseDeletePayload = `
DELETE FROM event_payloads WHERE provider = $1 AND event_id = $2 AND received_at = $3`

	qEraseUpdatePayload = `
UPDATE event_payloads SET payload = $4::jsonb, event = $5::jsonb, event_id = $6
WHERE provider = $1 AND event_id = $2 AND received_at = $3`

	// Rows recorded before 00009 hold their payload here until MoveLegacyPayloads moves it.
	qEraseEvents = `
SELECT provider, event_id, payload::text, normalized::text, COALESCE(normalized->>'kind' = $4, false),
       COALESCE(normalized->>'recipient', ''), relay_error, quarantine_error, COALESCE(message_id, '')
FROM ONLY %s
WHERE ctid >= $2::tid AND ctid < $3::tid
  AND ((payload IS NOT NULL AND (lower(payload::text) LIKE ANY($1) OR lower(normalized::text) LIKE ANY($1)))
       OR lower(relay_error) LIKE ANY($1) OR lower(quarantine_error) LIKE ANY($1)
       OR lower(event_id) LIKE ANY($1) OR lower(message_id) LIKE ANY($1))
FOR UPDATE`

	// A re-keyed event ($7) takes its replays along (their key and workflow ID) in the same
	// statement, so their foreign key holds when it is checked, at the statement's end.
	qEraseUpdateEvent = `
WITH replays AS (
    UPDATE replays SET event_id = $7, workflow_id = replace(workflow_id, $2, $7)
    WHERE provider = $1 AND event_id = $2 AND $7 <> $2
)
UPDATE webhook_events SET payload = $3::jsonb, normalized = $4::jsonb, relay_error = $5, quarantine_error = $6,
    event_id = $7, message_id = NULLIF($8, '')
WHERE provider = $1 AND event_id = $2`

	qEraseBodies = `
SELECT id, created_at, body::text, COALESCE(body->>'type' = $4, false)
FROM ONLY %s
WHERE ctid >= $2::tid AND ctid < $3::tid AND lower(body::text) LIKE ANY($1)
FOR UPDATE`

	qEraseDeleteBody = `DELETE FROM notification_bodies WHERE id = $1 AND created_at = $2`

	qEraseUpdateBody = `UPDATE notification_bodies SET body = $3::jsonb WHERE id = $1 AND created_at = $2`

	qEraseNotifications = `
SELECT id, type, body::text, last_error, provider, event_id, COALESCE(message_id, '')
FROM ONLY %s
WHERE ctid >= $2::tid AND ctid < $3::tid
  AND (lower(body::text) LIKE ANY($1) OR lower(last_error) LIKE ANY($1)
       OR lower(event_id) LIKE ANY($1) OR lower(message_id) LIKE ANY($1))
FOR UPDATE`

	qEraseUpdateNotification = `
UPDATE notifications SET body = $2::jsonb, last_error = $3, event_id = $4, message_id = NULLIF($5, '') WHERE id = $1`

	qEraseMessages = `
SELECT provider, message_id, recipient, diagnostic, order_event_id
FROM ONLY %s
WHERE ctid >= $2::tid AND ctid < $3::tid
  AND (lower(recipient) LIKE ANY($1) OR lower(diagnostic) LIKE ANY($1)
       OR lower(message_id) LIKE ANY($1) OR lower(order_event_id) LIKE ANY($1))
FOR UPDATE`

	// A message re-keyed ($5) to a key that has a row already (events after the upgrade that
	// did not adopt it) is dropped: the row under the current key stands, and the message's
	// events join it (their message_id is re-keyed too). One row either way, as flush checks.
	qEraseUpdateMessage = `
WITH merged AS (
    DELETE FROM messages WHERE provider = $1 AND message_id = $2 AND $5 <> $2
      AND EXISTS (SELECT 1 FROM messages WHERE provider = $1 AND message_id = $5)
    RETURNING 1
), moved AS (
    UPDATE messages SET recipient = $3, diagnostic = $4, message_id = $5, order_event_id = $6
    WHERE provider = $1 AND message_id = $2 AND NOT EXISTS (SELECT 1 FROM merged)
    RETURNING 1
)
SELECT 1 FROM merged UNION ALL SELECT 1 FROM moved`

	qEraseMessageEvents = `
SELECT provider, event_id, recipient, diagnostic, note, message_id
FROM ONLY %s
WHERE ctid >= $2::tid AND ctid < $3::tid
  AND (lower(recipient) LIKE ANY($1) OR lower(diagnostic) LIKE ANY($1) OR lower(note) LIKE ANY($1)
       OR lower(event_id) LIKE ANY($1) OR lower(message_id) LIKE ANY($1))
FOR UPDATE`

	qEraseUpdateMessageEvent = `
UPDATE message_events SET recipient = $3, diagnostic = $4, note = $5, event_id = $6, message_id = $7
WHERE provider = $1 AND event_id = $2`

	qEraseSoftBounces = `
SELECT provider, event_id, address FROM ONLY %s
WHERE ctid >= $2::tid AND ctid < $3::tid AND lower(address) LIKE ANY($1)
FOR UPDATE`

	qEraseDeleteSoftBounce = `DELETE FROM soft_bounces WHERE provider = $1 AND event_id = $2`

	qEraseRejected = `
SELECT id, body, headers::text, reason, body_sealed
FROM ONLY %s
WHERE ctid >= $2::tid AND ctid < $3::tid
  AND (body_sealed OR lower(encode(body, 'escape')) LIKE ANY($1) OR strpos(encode(body, 'escape'), chr(92)) > 0
       OR lower(headers::text) LIKE ANY($1) OR lower(reason) LIKE ANY($1))
FOR UPDATE`

	qEraseDeleteRejected = `DELETE FROM rejected_requests WHERE id = $1`

	qEraseSuppressions = `
SELECT address, scope, provider, event_id, message_id, folded FROM ONLY %s
WHERE ctid >= $2::tid AND ctid < $3::tid AND lower(address) LIKE ANY($1)
FOR UPDATE`

	// The row moves to the hash ($3) in one statement, its cause re-keyed ($4, $5); a row the
	// hash already has in the scope keeps its cause and absorbs the moved one's window and
	// count, as a repeated suppression does (qUpsertSuppression).
	qEraseMoveSuppression = `
WITH moved AS (
    DELETE FROM suppressions WHERE address = $1 AND scope = $2
    RETURNING scope, reason, provider, event_id, message_id, first_seen, last_seen, times_seen, created_at, folded
)
INSERT INTO suppressions (address, scope, reason, provider, event_id, message_id, first_seen, last_seen, times_seen, created_at, folded)
SELECT $3, scope, reason, provider, $4, $5, first_seen, last_seen, times_seen, created_at, folded FROM moved
ON CONFLICT (address, scope) DO UPDATE
SET first_seen = LEAST(suppressions.first_seen, EXCLUDED.first_seen),
    last_seen  = GREATEST(suppressions.last_seen, EXCLUDED.last_seen),
    times_seen = suppressions.times_seen + EXCLUDED.times_seen,
    folded     = suppressions.folded OR EXCLUDED.folded,
    updated_at = now()`

	qEraseLifts = `
SELECT id, address, lift_reason, provider, event_id, message_id
FROM ONLY %s
WHERE ctid >= $2::tid AND ctid < $3::tid
  AND (lower(address) LIKE ANY($1) OR lower(lift_reason) LIKE ANY($1)
       OR lower(event_id) LIKE ANY($1) OR lower(message_id) LIKE ANY($1))
FOR UPDATE`

	qEraseUpdateLift = `
UPDATE suppression_lifts SET address = $2, lift_reason = $3, event_id = $4, message_id = $5 WHERE id = $1`

	// The check for a mailbox of yours: inbound emails whose recipient mentions the address.
	qInboundToPayloads = `
SELECT COALESCE(event->>'recipient', '') FROM ONLY %s
WHERE ctid >= $2::tid AND ctid < $3::tid AND event->>'kind' = $4 AND lower(event->>'recipient') LIKE ANY($1)`

	qInboundToLegacy = `
SELECT COALESCE(normalized->>'recipient', '') FROM ONLY %s
WHERE ctid >= $2::tid AND ctid < $3::tid AND payload IS NOT NULL AND normalized->>'kind' = $4
  AND lower(normalized->>'recipient') LIKE ANY($1)`
)
