package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
)

// An event is stored as two rows (migration 00009): its key and state in webhook_events, kept
// for retention.dedupe_keys, and its payload in event_payloads, partitioned by received_at and
// dropped after retention.payloads. Rows recorded before that migration keep their payload in
// webhook_events' legacy columns (payload, normalized) until MoveLegacyPayloads moves it.

// ErrNotNormalized: recorded before normalized events were kept (migration 00003), or with a
// normalized form jsonb refused.
var ErrNotNormalized = fmt.Errorf("%w: recorded without a normalized event", domain.ErrNoStoredEvent)

// ErrPayloadExpired: retention removed the payload (retention.payloads); the key remains, so a
// re-delivery is still a duplicate.
var ErrPayloadExpired = fmt.Errorf("%w: its payload was removed by retention (retention.payloads)", domain.ErrNoStoredEvent)

// jsonNull is the payload of an event whose adapter kept no provider JSON.
const jsonNull = "null"

// payloadColumns encodes ev for event_payloads: payload is the provider's own JSON (JSON null
// when the adapter had none), event the normalized event without it, so the raw JSON is stored
// once. event is nil when the normalized event holds something jsonb refuses (normalizedEvent).
//
// Both are strings, not []byte: in QueryExecModeExec (a transaction pooler,
// Options.TransactionPooler) pgx picks a parameter's type from its Go type, and []byte goes as
// bytea, which jsonb refuses.
func payloadColumns(ev domain.Event) (payload string, event any) {
	payload = jsonNull
	if raw := bytes.TrimSpace(ev.Raw); len(raw) > 0 {
		payload = string(raw)
	}
	ev.Raw = nil
	return payload, normalizedEvent(ev)
}

// normalizedEvent is the JSON event_payloads.event keeps of ev, so it can be processed again.
// It must never make recording fail (that would fail the event on every retry), so anything
// jsonb would refuse gives nil (NULL) instead: \u0000 can only come from a field no text column
// holds already (the recipient, the bounce type), since the provider's raw JSON and the event
// id, type and message id are stored as they are anyway.
func normalizedEvent(ev domain.Event) any {
	md := ev.Metadata
	ev.Metadata = nil
	b, err := json.Marshal(ev)
	if err != nil || jsonbStorable(b) != nil {
		return nil
	}
	if len(md) == 0 {
		return string(b)
	}
	return withMetadata(b, md)
}

// withMetadata is the event's JSON object b with its metadata member, the map as json.Marshal
// writes one but in map order: the column is jsonb, which keeps no key order, and
// encoding/json's map encoder (reflection, a sorted copy of the keys) was most of what metadata
// added to the accept path's encoding. The text is built once, at its size. nil, as
// normalizedEvent's, when jsonb would refuse it: a NUL (\u0000) in a key or a value.
func withMetadata(b []byte, md map[string]string) any {
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return nil
	}
	n := len(b) + len(`,"metadata":{}`)
	for k, v := range md {
		if strings.IndexByte(k, 0) >= 0 || strings.IndexByte(v, 0) >= 0 {
			return nil
		}
		n += len(k) + len(v) + len(`"":"",`)
	}
	var sb strings.Builder
	sb.Grow(n)
	sb.Write(b[:len(b)-1])
	if len(b) > 2 {
		sb.WriteByte(',')
	}
	sb.WriteString(`"metadata":{`)
	first := true
	for k, v := range md {
		if !first {
			sb.WriteByte(',')
		}
		first = false
		writeJSONString(&sb, k)
		sb.WriteByte(':')
		writeJSONString(&sb, v)
	}
	sb.WriteString("}}")
	return sb.String()
}

// writeJSONString writes s as a JSON string. Printable ASCII without a quote, a backslash or the
// characters json.Marshal escapes for HTML goes as it is; anything else takes json.Marshal, so
// the text is what it writes.
func writeJSONString(sb *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			sb.Write(q)
			return
		}
	}
	sb.WriteByte('"')
	sb.WriteString(s)
	sb.WriteByte('"')
}

// storedColumns reads an event's stored form next to its webhook_events row w; storedJoin must
// be in the FROM clause. The join names the partition key, so PostgreSQL probes only the
// partition of w.received_at.
const (
	storedColumns = `p.event, p.payload, w.normalized, (p.provider IS NOT NULL OR w.payload IS NOT NULL)`
	storedJoin    = `LEFT JOIN event_payloads p
       ON p.provider = w.provider AND p.event_id = w.event_id AND p.received_at = w.received_at`
)

// stored is what storedColumns scan into.
type stored struct {
	event, payload, legacy []byte
	kept                   bool
}

func (s *stored) dest() []any { return []any{&s.event, &s.payload, &s.legacy, &s.kept} }

// storedForm is the JSON an event is stored as: domain.Event's, and the time its body was
// removed (StripInboundBodies), when it was.
type storedForm struct {
	domain.Event
	BodyRemovedAt *time.Time `json:"body_removed_at,omitempty"`
}

// decode returns the stored event, or an error wrapping domain.ErrNoStoredEvent.
func (s stored) decode() (domain.Event, error) {
	var f storedForm
	switch {
	case !s.kept:
		return domain.Event{}, ErrPayloadExpired
	case s.event != nil:
		if err := json.Unmarshal(s.event, &f); err != nil {
			return domain.Event{}, fmt.Errorf("decode the stored event: %w", err)
		}
		f.Raw = nil
		if !bytes.Equal(s.payload, []byte(jsonNull)) {
			f.Raw = s.payload
		}
	case s.legacy != nil:
		// Recorded before 00009 and not moved yet: the legacy form holds its own raw, JSON
		// null when the adapter had none, which reads as no raw, as it does once moved.
		if err := json.Unmarshal(s.legacy, &f); err != nil {
			return domain.Event{}, fmt.Errorf("decode the stored event: %w", err)
		}
		if bytes.Equal(f.Raw, []byte(jsonNull)) {
			f.Raw = nil
		}
	default:
		return domain.Event{}, ErrNotNormalized
	}
	if f.BodyRemovedAt != nil {
		return f.Event, ErrBodyRemoved
	}
	return f.Event, nil
}

// MoveLegacyPayloads moves what rows written before migration 00009 keep in their legacy
// columns into the partitioned tables: event payloads from webhook_events (payload,
// normalized) into event_payloads, then notification bodies from notifications.body into
// notification_bodies, batch rows per transaction in key order, until none is left or ctx
// ends. It returns how many rows it moved, of both kinds. Each batch locks only its own rows,
// for milliseconds, so it runs beside the service (the retention run calls it until none is
// left); a row another transaction holds is skipped and moved by a later run. The partitions
// the moved rows need are created first.
//
// Moving frees nothing on disk by itself: the old row versions become dead space in
// webhook_events and notifications, which VACUUM makes reusable for new rows but returns to
// the operating system only with VACUUM FULL or pg_repack. A million events and 200,000
// bodies took 2.5 to 3 minutes on a shared 2-core machine (docs/BENCHMARKS.md, "Migration 00009 on a
// populated table"), which also says why the walk is in key order and not in physical order.
func (s *Retention) MoveLegacyPayloads(ctx context.Context, batch int, p domain.Partitioning) (int64, error) {
	if batch < 1 {
		return 0, fmt.Errorf("move legacy payloads: batch %d: must be at least 1", batch)
	}
	var oldest *time.Time
	if err := s.pool.QueryRow(ctx, qOldestLegacy).Scan(&oldest); err != nil {
		return 0, fmt.Errorf("move legacy payloads: %w", err)
	}
	if oldest == nil {
		return 0, nil
	}
	if _, err := s.EnsurePartitions(ctx, p, *oldest, time.Now()); err != nil {
		return 0, fmt.Errorf("move legacy payloads: %w", err)
	}
	events, err := s.moveLegacy(ctx, qMoveLegacy, batch, make([]string, 2))
	if err != nil {
		return events, fmt.Errorf("move legacy payloads: event payloads: %w", err)
	}
	bodies, err := s.moveLegacy(ctx, qMoveLegacyBodies, batch, make([]string, 1))
	if err != nil {
		return events + bodies, fmt.Errorf("move legacy payloads: notification bodies: %w", err)
	}
	return events + bodies, nil
}

// moveLegacy runs q, a walk of one table's primary key (its columns in last, "" to start),
// until it has seen every key. q takes the last key seen and the batch size, and returns how
// many rows it moved, how many keys it saw and the last of them.
func (s *Retention) moveLegacy(ctx context.Context, q string, batch int, last []string) (int64, error) {
	var moved int64
	for {
		args := make([]any, 0, len(last)+1)
		var n, seen int
		dest := []any{&n, &seen}
		for i := range last {
			args, dest = append(args, last[i]), append(dest, &last[i])
		}
		if err := s.pool.QueryRow(ctx, q, append(args, batch)...).Scan(dest...); err != nil {
			return moved, fmt.Errorf("after %q: %w", strings.Join(last, ":"), err)
		}
		moved += int64(n)
		if seen == 0 {
			return moved, nil
		}
		if err := ctx.Err(); err != nil {
			return moved, err
		}
	}
}

// The oldest time a legacy row needs a partition for (least ignores NULL).
const qOldestLegacy = `
SELECT least((SELECT min(received_at) FROM webhook_events WHERE payload IS NOT NULL),
             (SELECT min(created_at) FROM notifications WHERE body IS NOT NULL))`

// Walks the primary key from ($1, $2): each batch reads the next $3 keys, so the walk is linear
// in the table however many rows are already moved. jsonb's minus drops the raw copy the legacy
// normalized column held. The last key of the batch is returned whether or not its row was
// moved, and seen = 0 ends the walk.
const qMoveLegacy = `
WITH keys AS (
    SELECT provider, event_id
    FROM webhook_events
    WHERE (provider, event_id) > ($1, $2)
    ORDER BY provider, event_id
    LIMIT $3
), b AS (
    SELECT w.provider, w.event_id, w.received_at, w.payload, w.normalized
    FROM webhook_events w JOIN keys USING (provider, event_id)
    WHERE w.payload IS NOT NULL
    FOR UPDATE OF w SKIP LOCKED
), ins AS (
    INSERT INTO event_payloads (provider, event_id, received_at, payload, event)
    -- A legacy row whose adapter had no JSON of its own stored the normalized event as its
    -- payload, with a null raw: that is JSON null in the new form.
    SELECT provider, event_id, received_at,
           CASE WHEN normalized->'raw' = 'null'::jsonb THEN 'null'::jsonb ELSE payload END,
           normalized - 'raw'
    FROM b
    ON CONFLICT DO NOTHING
), upd AS (
    UPDATE webhook_events w
    SET payload = NULL, normalized = NULL
    FROM b
    WHERE w.provider = b.provider AND w.event_id = b.event_id
    RETURNING 1
), last AS (
    SELECT provider, event_id FROM keys ORDER BY provider DESC, event_id DESC LIMIT 1
)
SELECT (SELECT count(*) FROM upd)::int, (SELECT count(*) FROM keys)::int,
       COALESCE((SELECT provider FROM last), ''), COALESCE((SELECT event_id FROM last), '')`

// The same walk over notifications: a legacy body goes to notification_bodies under the
// row's (id, created_at), where the readers (notificationFrom) look first.
const qMoveLegacyBodies = `
WITH keys AS (
    SELECT id
    FROM notifications
    WHERE id > $1
    ORDER BY id
    LIMIT $2
), b AS (
    SELECT n.id, n.created_at, n.body
    FROM notifications n JOIN keys USING (id)
    WHERE n.body IS NOT NULL
    FOR UPDATE OF n SKIP LOCKED
), ins AS (
    INSERT INTO notification_bodies (id, created_at, body)
    SELECT id, created_at, body FROM b
    ON CONFLICT DO NOTHING
), upd AS (
    UPDATE notifications n
    SET body = NULL
    FROM b
    WHERE n.id = b.id
    RETURNING 1
), last AS (
    SELECT id FROM keys ORDER BY id DESC LIMIT 1
)
SELECT (SELECT count(*) FROM upd)::int, (SELECT count(*) FROM keys)::int,
       COALESCE((SELECT id FROM last), '')`

// qInsertWebhookEvent inserts the key row and, when it is new, the payload row, in one
// statement; it returns pgx.ErrNoRows for a key already recorded.
const qInsertWebhookEvent = `
WITH k AS (
    INSERT INTO webhook_events (provider, event_id, event_type, message_id, occurred_at)
    VALUES ($1, $2, $3, $4, $5)
    ON CONFLICT (provider, event_id) DO NOTHING
    RETURNING provider, event_id, received_at
)
INSERT INTO event_payloads (provider, event_id, received_at, payload, event)
SELECT provider, event_id, received_at, $6::jsonb, $7::jsonb FROM k
RETURNING true`
