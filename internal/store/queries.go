package store

// SQL used by Store. Kept together so the statements can be reviewed against the schema in
// migrations/ in one place.

const (
	// An existing row: the inbox wrote it, or an earlier run of this event did. Either way this
	// run has now taken it up (picked_at, which the relay's in-flight count reads); the first
	// time is kept.
	qWebhookEventProcessed = `
UPDATE webhook_events
SET picked_at = COALESCE(picked_at, now())
WHERE provider = $1 AND event_id = $2
RETURNING processed_at IS NOT NULL`

	// COALESCE keeps the first processed_at: marking twice is not an error and must not move it.
	qMarkProcessed = `
UPDATE webhook_events
SET processed_at = COALESCE(processed_at, now())
WHERE provider = $1 AND event_id = $2
RETURNING processed_at`

	// qMarkProcessed with the notifications its run delivered and left for it to mark ($3): their
	// marks (as qMarkNotificationSent's, their sinks' failure counts reset) and the event's in
	// one statement, instead of one statement per notification before it.
	qMarkProcessedSent = `
WITH n AS (
    UPDATE notifications
    SET status = 'sent', sent_at = now(), attempts = attempts + 1, last_error = NULL,
        updated_at = now()
    WHERE id = ANY($3) AND status <> 'sent'
    RETURNING sink
), s AS (
    UPDATE sinks SET consecutive_failures = 0, updated_at = now()
    FROM (SELECT DISTINCT sink FROM n) d
    WHERE sinks.name = d.sink AND sinks.consecutive_failures > 0
)
UPDATE webhook_events
SET processed_at = COALESCE(processed_at, now())
WHERE provider = $1 AND event_id = $2
RETURNING processed_at`

	// qMarkProcessedSent for one notification, the run of an event with one sink: id = $3, not
	// id = ANY($3). PostgreSQL prices a generic plan's array parameter at 10 elements and a
	// custom plan's at the one it holds, so with ANY the custom plan always looks cheaper and the
	// statement is planned anew at every execution; with a scalar both price one row, and after
	// its first five executions on a connection it runs on the connection's cached generic plan
	// (TestTheEventPathRunsOnCachedPlans). Same plan: the primary key, one row.
	qMarkProcessedSentOne = `
WITH n AS (
    UPDATE notifications
    SET status = 'sent', sent_at = now(), attempts = attempts + 1, last_error = NULL,
        updated_at = now()
    WHERE id = $3 AND status <> 'sent'
    RETURNING sink
), s AS (
    UPDATE sinks SET consecutive_failures = 0, updated_at = now()
    FROM n
    WHERE sinks.name = n.sink AND sinks.consecutive_failures > 0
)
UPDATE webhook_events
SET processed_at = COALESCE(processed_at, now())
WHERE provider = $1 AND event_id = $2
RETURNING processed_at`

	qRecordedOutcome = `
SELECT outcome, from_status, to_status, bounce_type, recipient, version, suppressed
FROM message_events
WHERE provider = $1 AND event_id = $2`

	// Both by their primary key and message_events_message_idx: it costs two index reads for
	// an event whose message has no prior row, which is every event once the upgrade is past.
	qAdoptPriorMessage = `
WITH moved AS (
    UPDATE messages SET message_id = $3, updated_at = now()
    WHERE provider = $1 AND message_id = $2
      AND NOT EXISTS (SELECT 1 FROM messages WHERE provider = $1 AND message_id = $3)
    RETURNING 1
)
UPDATE message_events SET message_id = $3
WHERE provider = $1 AND message_id = $2 AND EXISTS (SELECT 1 FROM moved)`

	// FOR UPDATE serializes every ApplyStatus of one message, so the state computed in Go
	// from this row is still current when it is written back.
	qLockMessage = `
SELECT ` + messageStateColumns + `
FROM messages
WHERE provider = $1 AND message_id = $2
FOR UPDATE`

	// Creates the message unless it exists, and locks and reads it, in one statement: the new row (which this statement's
	// snapshot cannot read, so it comes from RETURNING, locked as any row this transaction
	// wrote) or the existing one, locked and read in its latest version as FOR UPDATE reads it.
	// No row means a concurrent transaction inserted the message after this statement's
	// snapshot was taken: qLockMessage, a statement of its own, reads it then.
	// A new message is created with the recipient its first event names ($3), which the
	// outcome's update would set anyway (the first recipient named is kept): that update then
	// leaves every indexed column as it is, so PostgreSQL can make it a HOT update instead of
	// writing a new entry into messages_pkey and messages_recipient_key_idx (whose key is a SQL
	// function's result) for every new message.
	qEnsureLockMessage = `
WITH ins AS (
    INSERT INTO messages (provider, message_id, recipient)
    VALUES ($1, $2, $3)
    ON CONFLICT (provider, message_id) DO NOTHING
    RETURNING ` + messageStateColumns + `
), cur AS (
    SELECT ` + messageStateColumns + `
    FROM messages
    WHERE provider = $1 AND message_id = $2
    FOR UPDATE
)
SELECT * FROM ins
UNION ALL
SELECT * FROM cur`

	messageStateColumns = `status, bounce_type, recipient, order_rank, order_occurred_at, order_event_id, version,
       unsubscribed, unsubscribed_at, opens, clicks, first_opened_at, first_clicked_at,
       corrected_at, smtp_code, enhanced_code, diagnostic, bounce_category`

	qGetMessage = `
SELECT provider, message_id, status, bounce_type, recipient, version, unsubscribed,
       unsubscribed_at, opens, clicks, first_opened_at, first_clicked_at, corrected_at,
       created_at, updated_at, smtp_code, enhanced_code, diagnostic, bounce_category
FROM messages
WHERE provider = $1 AND message_id = $2`

	qMessageHistory = `
SELECT event_id, event_type, COALESCE(status, ''), occurred_at, received_at, outcome,
       from_status, to_status, version, actor, note, suppressed,
       smtp_code, enhanced_code, diagnostic, bounce_category
FROM message_events
WHERE provider = $1 AND message_id = $2
ORDER BY received_at, event_id`

	// A message's notifications: those of its events (the unique (provider, event_id, sink,
	// type) index finds each event's), without bodies.
	qMessageNotifications = `
SELECT n.id, n.event_id, n.sink, n.type, n.status, n.attempts, COALESCE(n.last_error, ''),
       n.created_at, n.parked_at, COALESCE(n.park_reason, ''), n.sent_at
FROM message_events me
JOIN notifications n ON n.provider = me.provider AND n.event_id = me.event_id
WHERE me.provider = $1 AND me.message_id = $2
ORDER BY n.created_at, n.id`

	// The state row and its body (partitioned by created_at, kept for retention.payloads) in
	// one statement, both or neither, read back with the sink's gate as qGetNotification reads
	// them: a new notification costs one round trip. No row means the notification existed (or
	// a concurrent insert won, which this statement's snapshot cannot see): qGetNotification
	// reads it then. The conflict has no target: the row has two unique keys, its id (a hash of
	// the other) and (provider, event_id, sink, type), and a conflict target names one; two
	// concurrent inserts of one notification then met on the other and one failed with 23505
	// (notifications_pkey), a failed attempt, seen under load in
	// TestEnsureNotificationConcurrentlyReturnsTheOneStoredRow.
	qEnsureNotification = `
WITH n AS (
    INSERT INTO notifications (id, provider, event_id, sink, type, message_id, version)
    VALUES ($1, $2, $3, $4, $5, NULLIF($7, ''), NULLIF($8::bigint, 0))
    ON CONFLICT DO NOTHING
    RETURNING *
), b AS (
    INSERT INTO notification_bodies (id, created_at, body)
    SELECT id, created_at, $6::jsonb FROM n
    RETURNING id, created_at, body
)
SELECT ` + notificationColumns + `, COALESCE(s.state, 'closed'), COALESCE(s.paused, false)
FROM n
LEFT JOIN b ON b.id = n.id AND b.created_at = n.created_at
LEFT JOIN sinks s ON s.name = n.sink`

	// The body is NULL once retention dropped its partition. n.body is the legacy column of
	// rows written before migration 00009.
	notificationColumns = `n.id, n.provider, n.event_id, n.sink, n.type, n.status, n.attempts,
       COALESCE(n.last_error, ''), COALESCE(b.body, n.body), n.created_at, n.sent_at,
       COALESCE(n.message_id, ''), COALESCE(n.version, 0), n.parked_at, COALESCE(n.park_reason, '')`
	notificationFrom = `notifications n
LEFT JOIN notification_bodies b ON b.id = n.id AND b.created_at = n.created_at`

	// With the sink's gate, read in the same statement: a first attempt costs no query more.
	qGetNotification = `
SELECT ` + notificationColumns + `, COALESCE(s.state, 'closed'), COALESCE(s.paused, false)
FROM ` + notificationFrom + `
LEFT JOIN sinks s ON s.name = n.sink
WHERE n.provider = $1 AND n.event_id = $2 AND n.sink = $3 AND n.type = $4`

	// An attempt still running when the workflow gave up can finish after the row was marked
	// failed; it is counted, but the recorded reason for giving up stays.
	qRecordNotificationAttempt = `
UPDATE notifications
SET attempts = attempts + 1,
    last_error = CASE WHEN status IN ('pending', 'parked') THEN NULLIF($2, '') ELSE last_error END,
    updated_at = now()
WHERE id = $1`

	// qRecordNotificationAttempt for a failed wave of a broker drain, in one statement: the
	// $1[i]-th notification's error is $2[i].
	qRecordNotificationAttempts = `
UPDATE notifications n
SET attempts = n.attempts + 1,
    last_error = CASE WHEN n.status IN ('pending', 'parked') THEN NULLIF(f.error, '') ELSE n.last_error END,
    updated_at = now()
FROM unnest($1::text[], $2::text[]) AS f(id, error)
WHERE n.id = f.id`

	// The status guard makes a repeated success a no-op, so attempts and sent_at keep the
	// values of the delivery that actually succeeded first.
	// A success also ends the sink's run of failures; the sinks row is written only when there
	// was one, so a healthy sink's notifications do not all write one row.
	qMarkNotificationSent = `
WITH n AS (
    UPDATE notifications
    SET status = 'sent', sent_at = now(), attempts = attempts + 1, last_error = NULL,
        updated_at = now()
    WHERE id = $1 AND status <> 'sent'
    RETURNING sink
), s AS (
    UPDATE sinks SET consecutive_failures = 0, updated_at = now()
    FROM n
    WHERE sinks.name = n.sink AND sinks.consecutive_failures > 0
)
SELECT count(*) FROM n`

	qMarkNotificationsSent = `
WITH n AS (
    UPDATE notifications
    SET status = 'sent', sent_at = now(), attempts = attempts + 1, last_error = NULL,
        updated_at = now()
    WHERE id = ANY($1) AND status <> 'sent'
    RETURNING sink
)
UPDATE sinks SET consecutive_failures = 0, updated_at = now()
FROM (SELECT DISTINCT sink FROM n) d
WHERE sinks.name = d.sink AND sinks.consecutive_failures > 0`

	// A notification that was delivered stays sent even if a late failure report arrives.
	// A notification already failed keeps the cause recorded first: the attempt that failed
	// for good records the sink's whole answer, and the run's MarkProcessed, coming after, only
	// knows its status line.
	qMarkNotificationFailed = `
UPDATE notifications
SET status = 'failed', updated_at = now(),
    last_error = CASE WHEN status = 'failed' AND last_error IS NOT NULL THEN last_error ELSE NULLIF($2, '') END
WHERE id = $1 AND status <> 'sent'`

	qNotificationExists = `SELECT EXISTS (SELECT 1 FROM notifications WHERE id = $1)`

	qBacklog = `SELECT count(*), min(received_at) FROM webhook_events WHERE processed_at IS NULL`

	// Runs inside ApplyStatus's transaction, after the message lock and before the outcome is
	// recorded, so a lost race rolls it back with everything else. xmax = 0 only for a row this
	// statement inserted: the event added the address to the scope ($7, '' = global). An
	// existing row keeps the event that first suppressed it; later events widen the seen window
	// and count. Each scope's row stands alone: a global row does not absorb a scoped event, so
	// lifting the global row later still leaves the opt-out of that scope.
	qUpsertSuppression = `
INSERT INTO suppressions (address, reason, provider, event_id, message_id, first_seen, last_seen, scope)
VALUES ($1, $2, $3, $4, $5, $6, $6, $7)
ON CONFLICT (address, scope) DO UPDATE
SET first_seen = LEAST(suppressions.first_seen, EXCLUDED.first_seen),
    last_seen  = GREATEST(suppressions.last_seen, EXCLUDED.last_seen),
    times_seen = suppressions.times_seen + 1,
    updated_at = now()
RETURNING xmax = 0`

	suppressionColumns = `address, scope, reason, provider, event_id, message_id, first_seen, last_seen, times_seen`

	// Global ('') sorts first: the row that matters most for the address leads. $1 is every key
	// the address's rows may be under (Suppressions.keysOf): its key and the key it was left
	// under if it was erased, and, for a row an older version wrote (folded), the keys that
	// version gave it; $2 is the first two, found whether folded or not; the address's own row
	// ($3) leads its erased one within a scope.
	qAddressSuppressions = `
SELECT ` + suppressionColumns + `
FROM suppressions
WHERE address = ANY($1) AND (folded OR address = ANY($2))
ORDER BY scope, address <> $3`

	// The check a sender makes before every send: one scan of the (address, scope) primary key
	// for a few rows, the global one and the asked scope's ($2 = '' asks global only), under
	// the keys of qAddressSuppressions ($1 all, $3 those found whether folded or not).
	qCheckSuppression = `
SELECT scope, reason
FROM suppressions
WHERE address = ANY($1) AND scope IN ('', $2) AND (folded OR address = ANY($3))
ORDER BY scope`

	// Keyset paging by address, whole addresses per page: page picks the next $2 addresses with
	// a row that passes the filter, the outer query returns those rows. %[1]s is the filter
	// (listSuppressionsSQL): a filter not asked for is left out of the SQL rather than disabled
	// by an OR on its parameter, so a cached generic plan can still use (reason, address) or
	// (scope, address) to find a small reason's or scope's rows among millions.
	qListSuppressions = `
WITH page AS (
    SELECT DISTINCT address
    FROM suppressions
    WHERE address > $1%[1]s
    ORDER BY address
    LIMIT $2
)
SELECT ` + suppressionColumns + `
FROM suppressions JOIN page USING (address)
WHERE true%[1]s
ORDER BY address, scope`

	// The address's row and, once it was erased, its hash's ($3, Store.erasedKey).
	qDeleteSuppression = `
DELETE FROM suppressions
WHERE address = ANY($1) AND scope = $2 AND (folded OR address = ANY($3))
RETURNING ` + suppressionColumns

	qInsertSuppressionLift = `
INSERT INTO suppression_lifts (address, scope, reason, provider, event_id, message_id, first_seen,
                               last_seen, times_seen, lifted_by, lift_reason)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
RETURNING id, lifted_at`
)
