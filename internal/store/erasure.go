package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/erasure"
	"github.com/mailhook/mailhook/internal/mailaddr"
)

// Erasure (GDPR art. 17) removes or redacts an address everywhere mailhook stored it, in one
// transaction (docs/OPERATIONS.md "Erasure"):
//
//   - event payloads (event_payloads, and webhook_events' legacy columns) and notification bodies
//     (notification_bodies, and notifications' legacy body) that mention it: an inbound email's
//     (email.received's) is removed whole, its key row kept; any other has the address redacted
//     in its JSON (erasure.Matcher.RedactJSON), a normalized event losing a recipient that is
//     the address;
//   - messages and message_events: a recipient that is the address is emptied, and the
//     diagnostic and note have it redacted; so do notifications.last_error and webhook_events'
//     relay and quarantine errors;
//   - soft_bounces of the address are deleted (the escalation's count starts again);
//   - suppressions and suppression_lifts keep their rows under the keyed hash of the address
//     (erasure.Hasher) instead of the address, so that the suppression check, asked for the
//     address, still finds it; a lift's reason has the address redacted;
//   - one erasures row records it: the hash, who, why (redacted), and how many rows each table
//     had changed.
//
// Candidate rows are found by LIKE over each column's lower-cased text (a scan of every payload:
// nothing indexes the inside of a payload), and the Go matcher decides, so "_" in an address or a
// longer address that contains it (joann@ for ann@) changes nothing. Erasing again finds
// nothing left: every count is 0, and only a new erasures row is written.

// ErasureTables are the tables an erasure changes, the keys of Erasure.Counts.
var ErasureTables = []string{
	"event_payloads", "webhook_events", "notification_bodies", "notifications",
	"messages", "message_events", "soft_bounces", "suppressions", "suppression_lifts",
}

// ErrErasureNotConfigured is returned (wrapped) by Erase when no hash key is set: an erased
// suppression could not be kept, and a hash under a made-up key could be reversed by hashing
// guessed addresses.
var ErrErasureNotConfigured = errors.New("erasure is not configured: set erasure.hash_key (MAILHOOK_ERASURE_KEY) to base64 of 32 random bytes")

// ErrInvalidAddress is returned (wrapped) by Erase for what is not one email address.
var ErrInvalidAddress = erasure.ErrInvalidAddress

// SetErasureHasher sets the key of the hash that replaces an erased address (config
// erasure.hash_key). Call it before the store is used. Without it Erase refuses, and the
// suppression reads find plain addresses only.
func (s *Store) SetErasureHasher(h erasure.Hasher) { s.hasher = h }

// ErrSharedAddress is returned (wrapped, as *SharedAddressError) by Erase when the address is
// one inbound emails were sent to (support@yourapp.example): erasing it would remove every
// customer's email to that mailbox. Nothing was changed. ErasureRequest.Force erases it anyway,
// and ErasureScopeInbound removes only the inbound emails.
var ErrSharedAddress = errors.New("the address received inbound emails: erasing it removes every one of them")

// SharedAddressError is ErrSharedAddress with what the erasure would have changed.
type SharedAddressError struct{ Would Erasure }

func (e *SharedAddressError) Error() string {
	return fmt.Sprintf("%v (%d of them)", ErrSharedAddress, e.Would.InboundTo)
}

func (e *SharedAddressError) Unwrap() error { return ErrSharedAddress }

// Erasure scopes: what of an address an erasure changes.
const (
	// ErasureScopeAll erases the address everywhere (the default).
	ErasureScopeAll = "all"
	// ErasureScopeInbound removes only the inbound emails that mention the address, and their
	// notification bodies: for a mailbox of yours whose mail must go, while its suppressions,
	// messages and the rest stay as they are.
	ErasureScopeInbound = "inbound"
)

// ErasureRequest asks to erase an address.
type ErasureRequest struct {
	// Address is erased: it is normalized as a suppressions key, and never stored or logged.
	Address string
	// ErasedBy names who asked (the admin token's name, or cli:<user>).
	ErasedBy string
	// Reason says why (a ticket, a request's date); any mention of the address is redacted.
	Reason string
	// Scope is ErasureScopeAll ("" too) or ErasureScopeInbound.
	Scope string
	// Force erases an address that inbound emails were sent to (see ErrSharedAddress).
	Force bool
	// DryRun finds and counts what the erasure would change, changes nothing and records no
	// audit row.
	DryRun bool
}

// Erasure is the audit row of one erasure, as POST /v1/erasures answers it. It holds no address.
type Erasure struct {
	ID          int64  `json:"id"`
	AddressHash string `json:"address_hash"`
	ErasedBy    string `json:"erased_by"`
	Reason      string `json:"reason"`
	// Counts says, per table of ErasureTables, how many rows were changed: removed, redacted or
	// re-keyed under the hash.
	Counts map[string]int64 `json:"counts"`
	// Total is the sum of Counts: 0 when nothing was left to erase.
	Total int64 `json:"total"`
	// Scope is what was erased: ErasureScopeAll or ErasureScopeInbound.
	Scope string `json:"scope"`
	// InboundTo counts the inbound emails sent to the address among those removed: more than 0
	// only for a mailbox of yours, which takes Force or ErasureScopeInbound.
	InboundTo int64 `json:"inbound_to_address"`
	// DryRun says nothing was changed: the counts are what the erasure would change, and ID is
	// 0 (no audit row).
	DryRun   bool      `json:"dry_run"`
	TookMS   int64     `json:"took_ms"`
	ErasedAt time.Time `json:"erased_at"`
}

// Erase erases an address (see above) in one transaction: a failure changes nothing, and a
// concurrent reader sees the address either everywhere or nowhere, so the suppression check
// never finds it unsuppressed half-way. Two erasures of one address take turns. Errors wrap
// ErrErasureNotConfigured or ErrInvalidAddress, or are the database's, and name the address by
// its hash only.
func (s *Store) Erase(ctx context.Context, req ErasureRequest) (Erasure, error) {
	start := time.Now()
	if !s.hasher.Configured() {
		return Erasure{}, fmt.Errorf("erase: %w", ErrErasureNotConfigured)
	}
	address := mailaddr.Key(req.Address)
	m, err := erasure.NewMatcher(address)
	if err != nil {
		return Erasure{}, fmt.Errorf("erase: %w", err)
	}
	hash, err := s.hasher.Hash(address)
	if err != nil {
		return Erasure{}, fmt.Errorf("erase: %w", err)
	}
	scope := cmp.Or(req.Scope, ErasureScopeAll)
	if scope != ErasureScopeAll && scope != ErasureScopeInbound {
		return Erasure{}, fmt.Errorf("erase: scope %q: %w", scope, ErrInvalidErasureScope)
	}
	reason, _ := m.RedactText(req.Reason)
	out := Erasure{AddressHash: hash, ErasedBy: req.ErasedBy, Reason: reason, Scope: scope, DryRun: req.DryRun}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, qEraseLock, hash); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		w := &eraser{tx: tx, m: m, hasher: s.hasher, likes: m.LikePatterns(), counts: map[string]int64{},
			inboundOnly: scope == ErasureScopeInbound}
		for _, table := range ErasureTables {
			w.counts[table] = 0
		}
		steps := []func(context.Context) error{w.payloads, w.events, w.bodies, w.notifications}
		if !w.inboundOnly {
			steps = append(steps, w.messages, w.messageEvents, w.softBounces, w.suppressions, w.lifts)
		}
		for _, step := range steps {
			if err := step(ctx); err != nil {
				return err
			}
		}
		out.Counts, out.Total, out.InboundTo = w.counts, 0, w.inboundTo
		for _, n := range w.counts {
			out.Total += n
		}
		out.TookMS = time.Since(start).Milliseconds()
		switch {
		case req.DryRun:
			return errDryRun
		case w.inboundTo > 0 && !req.Force && !w.inboundOnly:
			return &SharedAddressError{Would: out}
		}
		if err := w.flush(ctx); err != nil {
			return err
		}
		counts, err := json.Marshal(out.Counts)
		if err != nil {
			return err
		}
		out.TookMS = time.Since(start).Milliseconds()
		return tx.QueryRow(ctx, qInsertErasure, hash, out.ErasedBy, out.Reason, string(counts), out.Total, out.TookMS).
			Scan(&out.ID, &out.ErasedAt)
	})
	switch {
	case errors.Is(err, errDryRun):
		return out, nil
	case err != nil:
		return Erasure{}, fmt.Errorf("erase %s: %w", hash, err)
	}
	return out, nil
}

// errDryRun rolls a dry run's transaction back.
var errDryRun = errors.New("dry run")

// ErrInvalidErasureScope is returned (wrapped) by Erase for a scope that is neither
// ErasureScopeAll nor ErasureScopeInbound.
var ErrInvalidErasureScope = errors.New("not an erasure scope (all, inbound)")

// eraser finds one erasure's rows and queues their changes, sent in one batch by flush.
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

// candidates runs a candidate query, whose $1 is the matcher's patterns, and calls each for every
// row, with scan's destinations filled.
func (w *eraser) candidates(ctx context.Context, table, sql string, scan []any, each func() error, args ...any) error {
	return w.query(ctx, "find "+table, sql, scan, each, append([]any{w.likes}, args...)...)
}

// locked runs a query that locks and reads the rows a candidate query found, by their keys.
func (w *eraser) locked(ctx context.Context, table, sql string, scan []any, each func() error, args ...any) error {
	return w.query(ctx, "lock "+table, sql, scan, each, args...)
}

func (w *eraser) query(ctx context.Context, what, sql string, scan []any, each func() error, args ...any) error {
	rows, err := w.tx.Query(ctx, sql, args...)
	if err == nil {
		_, err = pgx.ForEachRow(rows, scan, each)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// redactJSON is RedactJSON (or RedactEvent) of a jsonb column's text, nil for SQL NULL; the
// result goes back as text (see payloadColumns).
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

func (w *eraser) payloads(ctx context.Context) error {
	var (
		provider, eventID string
		receivedAt        time.Time
		payload, event    []byte
		inbound           bool
		// The keys as typed slices: in QueryExecModeExec (WithTransactionPooler) pgx picks an
		// array parameter's type from its Go type.
		providers, eventIDs []string
		receivedAts         []time.Time
	)
	err := w.candidates(ctx, "event_payloads", qFindPayloads, []any{&provider, &eventID, &receivedAt}, func() error {
		providers, eventIDs, receivedAts = append(providers, provider), append(eventIDs, eventID), append(receivedAts, receivedAt)
		return nil
	})
	if err != nil || len(providers) == 0 {
		return err
	}
	var recipient string
	return w.locked(ctx, "event_payloads", qLockPayloads, []any{&provider, &eventID, &receivedAt, &payload, &event, &inbound, &recipient}, func() error {
		if w.inboundOnly && !inbound {
			return nil
		}
		newPayload, pc, err := w.redactJSON(payload, false)
		if err != nil {
			return fmt.Errorf("payload of %s:%s: %w", provider, eventID, err)
		}
		newEvent, ec, err := w.redactJSON(event, true)
		if err != nil {
			return fmt.Errorf("event of %s:%s: %w", provider, eventID, err)
		}
		switch {
		case !pc && !ec:
		case inbound:
			w.countInboundTo(recipient)
			w.change("event_payloads", qEraseDeletePayload, provider, eventID, receivedAt)
		default:
			w.change("event_payloads", qEraseUpdatePayload, provider, eventID, receivedAt, newPayload, newEvent)
		}
		return nil
	}, providers, eventIDs, receivedAts, string(domain.KindInbound))
}

func (w *eraser) events(ctx context.Context) error {
	var (
		provider, eventID       string
		payload, normalized     []byte
		inbound                 bool
		recipient               string
		relayError, quarantined *string
	)
	return w.candidates(ctx, "webhook_events", qEraseEvents, []any{&provider, &eventID, &payload, &normalized, &inbound, &recipient, &relayError, &quarantined}, func() error {
		if w.inboundOnly && !inbound {
			return nil
		}
		newPayload, pc, err := w.redactJSON(payload, false)
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
		if pc || nc || rc || qc {
			w.change("webhook_events", qEraseUpdateEvent, provider, eventID, newPayload, newNormalized, newRelay, newQuarantine)
		}
		return nil
	}, string(domain.KindInbound))
}

func (w *eraser) bodies(ctx context.Context) error {
	var (
		id         string
		createdAt  time.Time
		body       []byte
		inbound    bool
		ids        []string
		createdAts []time.Time
	)
	err := w.candidates(ctx, "notification_bodies", qFindBodies, []any{&id, &createdAt}, func() error {
		ids, createdAts = append(ids, id), append(createdAts, createdAt)
		return nil
	})
	if err != nil || len(ids) == 0 {
		return err
	}
	return w.locked(ctx, "notification_bodies", qLockBodies, []any{&id, &createdAt, &body, &inbound}, func() error {
		newBody, changed, err := w.redactJSON(body, false)
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
	}, ids, createdAts, domain.TypeEmailReceived)
}

func (w *eraser) notifications(ctx context.Context) error {
	var (
		id, typ   string
		body      []byte
		lastError *string
	)
	return w.candidates(ctx, "notifications", qEraseNotifications, []any{&id, &typ, &body, &lastError}, func() error {
		newBody, bc, err := w.redactJSON(body, false)
		if err != nil {
			return fmt.Errorf("legacy body of notification %s: %w", id, err)
		}
		if bc && typ == domain.TypeEmailReceived {
			newBody = nil
		}
		newError, ec := w.redactText(lastError)
		if w.inboundOnly {
			bc = bc && typ == domain.TypeEmailReceived
			newError, ec = lastError, false
			if !bc {
				newBody = body
			}
		}
		if bc || ec {
			w.change("notifications", qEraseUpdateNotification, id, newBody, newError)
		}
		return nil
	})
}

func (w *eraser) messages(ctx context.Context) error {
	var provider, messageID, recipient, diagnostic string
	return w.candidates(ctx, "messages", qEraseMessages, []any{&provider, &messageID, &recipient, &diagnostic}, func() error {
		r, rc := w.clearRecipient(recipient)
		d, dc := w.m.RedactText(diagnostic)
		if rc || dc {
			w.change("messages", qEraseUpdateMessage, provider, messageID, r, d)
		}
		return nil
	})
}

func (w *eraser) messageEvents(ctx context.Context) error {
	var provider, eventID, recipient, diagnostic, note string
	return w.candidates(ctx, "message_events", qEraseMessageEvents, []any{&provider, &eventID, &recipient, &diagnostic, &note}, func() error {
		r, rc := w.clearRecipient(recipient)
		d, dc := w.m.RedactText(diagnostic)
		n, nc := w.m.RedactText(note)
		if rc || dc || nc {
			w.change("message_events", qEraseUpdateMessageEvent, provider, eventID, r, d, n)
		}
		return nil
	})
}

func (w *eraser) softBounces(ctx context.Context) error {
	var provider, eventID, address string
	return w.candidates(ctx, "soft_bounces", qEraseSoftBounces, []any{&provider, &eventID, &address}, func() error {
		if w.m.Mentions(address) {
			w.change("soft_bounces", qEraseDeleteSoftBounce, provider, eventID)
		}
		return nil
	})
}

// suppressions re-keys each row of the address under its hash, merging it into a row the hash
// already has in that scope (an address suppressed again after an earlier erasure).
func (w *eraser) suppressions(ctx context.Context) error {
	var address, scope string
	return w.candidates(ctx, "suppressions", qEraseSuppressions, []any{&address, &scope}, func() error {
		if !w.m.Mentions(address) {
			return nil
		}
		hash, err := w.hasher.Hash(address)
		if err != nil {
			return err
		}
		w.change("suppressions", qEraseMoveSuppression, address, scope, hash)
		return nil
	})
}

func (w *eraser) lifts(ctx context.Context) error {
	var (
		id                  int64
		address, liftReason string
	)
	return w.candidates(ctx, "suppression_lifts", qEraseLifts, []any{&id, &address, &liftReason}, func() error {
		newAddress, ac := address, w.m.Mentions(address)
		if ac {
			var err error
			if newAddress, err = w.hasher.Hash(address); err != nil {
				return err
			}
		}
		newReason, rc := w.m.RedactText(liftReason)
		if ac || rc {
			w.change("suppression_lifts", qEraseUpdateLift, id, newAddress, newReason)
		}
		return nil
	})
}

// SQL of Erase. $1 of every candidate query is the matcher's patterns (lower-case LIKE patterns,
// matched against lower(column): lowering a value once costs a third of what ILIKE, which lowers
// it for each pattern, does). FOR UPDATE holds each candidate until the commit, so what is
// decided in Go is still what is written. The payloads and bodies, the large tables, are found
// first by a query that locks nothing, so that PostgreSQL may scan their partitions in parallel
// (it never runs a query that locks rows in parallel), and then locked and read by their keys; a
// row that starts to mention the address in between was written after the erasure began, as one
// written after it ends would be.
const (
	// Two erasures of one address take turns (the key is its hash), so each one's counts are
	// exact and the second finds nothing.
	qEraseLock = `SELECT pg_advisory_xact_lock(hashtextextended('mailhook.erasure:' || $1, 0))`

	// Every partition, whatever its time: a full scan of the payloads.
	qFindPayloads = `
SELECT provider, event_id, received_at
FROM event_payloads
WHERE lower(payload::text) LIKE ANY($1) OR lower(event::text) LIKE ANY($1)`

	qLockPayloads = `
SELECT p.provider, p.event_id, p.received_at, p.payload::text, p.event::text, COALESCE(p.event->>'kind' = $4, false),
       COALESCE(p.event->>'recipient', '')
FROM event_payloads p
JOIN unnest($1::text[], $2::text[], $3::timestamptz[]) AS k(provider, event_id, received_at)
  USING (provider, event_id, received_at)
FOR UPDATE OF p`

	qEraseDeletePayload = `
DELETE FROM event_payloads WHERE provider = $1 AND event_id = $2 AND received_at = $3`

	qEraseUpdatePayload = `
UPDATE event_payloads SET payload = $4::jsonb, event = $5::jsonb
WHERE provider = $1 AND event_id = $2 AND received_at = $3`

	// Rows recorded before 00009 hold their payload here until MoveLegacyPayloads moves it.
	qEraseEvents = `
SELECT provider, event_id, payload::text, normalized::text, COALESCE(normalized->>'kind' = $2, false),
       COALESCE(normalized->>'recipient', ''), relay_error, quarantine_error
FROM webhook_events
WHERE (payload IS NOT NULL AND (lower(payload::text) LIKE ANY($1) OR lower(normalized::text) LIKE ANY($1)))
   OR lower(relay_error) LIKE ANY($1) OR lower(quarantine_error) LIKE ANY($1)
FOR UPDATE`

	qEraseUpdateEvent = `
UPDATE webhook_events SET payload = $3::jsonb, normalized = $4::jsonb, relay_error = $5, quarantine_error = $6
WHERE provider = $1 AND event_id = $2`

	qFindBodies = `
SELECT id, created_at FROM notification_bodies WHERE lower(body::text) LIKE ANY($1)`

	qLockBodies = `
SELECT b.id, b.created_at, b.body::text, COALESCE(b.body->>'type' = $3, false)
FROM notification_bodies b
JOIN unnest($1::text[], $2::timestamptz[]) AS k(id, created_at) USING (id, created_at)
FOR UPDATE OF b`

	qEraseDeleteBody = `DELETE FROM notification_bodies WHERE id = $1 AND created_at = $2`

	qEraseUpdateBody = `UPDATE notification_bodies SET body = $3::jsonb WHERE id = $1 AND created_at = $2`

	qEraseNotifications = `
SELECT id, type, body::text, last_error
FROM notifications
WHERE lower(body::text) LIKE ANY($1) OR lower(last_error) LIKE ANY($1)
FOR UPDATE`

	qEraseUpdateNotification = `UPDATE notifications SET body = $2::jsonb, last_error = $3 WHERE id = $1`

	qEraseMessages = `
SELECT provider, message_id, recipient, diagnostic
FROM messages
WHERE lower(recipient) LIKE ANY($1) OR lower(diagnostic) LIKE ANY($1)
FOR UPDATE`

	qEraseUpdateMessage = `
UPDATE messages SET recipient = $3, diagnostic = $4 WHERE provider = $1 AND message_id = $2`

	qEraseMessageEvents = `
SELECT provider, event_id, recipient, diagnostic, note
FROM message_events
WHERE lower(recipient) LIKE ANY($1) OR lower(diagnostic) LIKE ANY($1) OR lower(note) LIKE ANY($1)
FOR UPDATE`

	qEraseUpdateMessageEvent = `
UPDATE message_events SET recipient = $3, diagnostic = $4, note = $5 WHERE provider = $1 AND event_id = $2`

	qEraseSoftBounces = `
SELECT provider, event_id, address FROM soft_bounces WHERE lower(address) LIKE ANY($1) FOR UPDATE`

	qEraseDeleteSoftBounce = `DELETE FROM soft_bounces WHERE provider = $1 AND event_id = $2`

	qEraseSuppressions = `
SELECT address, scope FROM suppressions WHERE lower(address) LIKE ANY($1) FOR UPDATE`

	// The row moves to the hash ($3) in one statement; a row the hash already has in the scope
	// keeps its cause and absorbs the moved one's window and count, as a repeated suppression
	// does (qUpsertSuppression).
	qEraseMoveSuppression = `
WITH moved AS (
    DELETE FROM suppressions WHERE address = $1 AND scope = $2
    RETURNING scope, reason, provider, event_id, message_id, first_seen, last_seen, times_seen, created_at
)
INSERT INTO suppressions (address, scope, reason, provider, event_id, message_id, first_seen, last_seen, times_seen, created_at)
SELECT $3, scope, reason, provider, event_id, message_id, first_seen, last_seen, times_seen, created_at FROM moved
ON CONFLICT (address, scope) DO UPDATE
SET first_seen = LEAST(suppressions.first_seen, EXCLUDED.first_seen),
    last_seen  = GREATEST(suppressions.last_seen, EXCLUDED.last_seen),
    times_seen = suppressions.times_seen + EXCLUDED.times_seen,
    updated_at = now()`

	qEraseLifts = `
SELECT id, address, lift_reason
FROM suppression_lifts
WHERE lower(address) LIKE ANY($1) OR lower(lift_reason) LIKE ANY($1)
FOR UPDATE`

	qEraseUpdateLift = `UPDATE suppression_lifts SET address = $2, lift_reason = $3 WHERE id = $1`

	qInsertErasure = `
INSERT INTO erasures (address_hash, erased_by, reason, counts, total, took_ms)
VALUES ($1, $2, $3, $4::jsonb, $5, $6)
RETURNING id, erased_at`
)
