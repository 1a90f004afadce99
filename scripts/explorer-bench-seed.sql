-- Seeds an explorer benchmark database (scripts/explorer-bench.sh): EVENTS events over MESSAGES
-- messages (5 events each), their history rows, a notification per delivered event, a busy
-- message with BUSY events, REJECTED refused requests and AUDIT audit rows, all inside
-- PostgreSQL with generate_series. Run with psql -v events=… -v messages=… -v busy=…
-- -v rejected=… -v audit=… on a migrated database. Times: the events spread over the last 30
-- days, newest last.
\set ON_ERROR_STOP on
SET synchronous_commit = off;
SET maintenance_work_mem = '512MB';

-- Providers, skewed as a real deployment is: mostly one, a few on their way out.
CREATE TEMP TABLE bench_providers (n int, provider text);
INSERT INTO bench_providers VALUES (0,'postscale'),(1,'postscale'),(2,'postscale'),(3,'postscale'),(4,'postscale'),
  (5,'postscale'),(6,'postscale'),(7,'sendgrid'),(8,'sendgrid'),(9,'mailgun'),(10,'postmark'),(11,'ses'),(12,'resend');

INSERT INTO messages (provider, message_id, status, recipient, version, order_rank, created_at, updated_at)
SELECT p.provider, 'msg_' || i,
       CASE WHEN i % 50 = 0 THEN 'bounced' ELSE 'delivered' END,
       -- One address in four messages; one in ten written with a display name and capitals.
       CASE WHEN i % 10 = 0 THEN 'User ' || (i % (:messages / 4)) || ' <User' || (i % (:messages / 4)) || '@Example.com>'
            ELSE 'user' || (i % (:messages / 4)) || '@example.com' END,
       2, 30, now() - interval '30 days' + (i * interval '30 days' / :messages), now()
FROM generate_series(1, :messages) AS i
JOIN bench_providers p ON p.n = i % 13;

-- Five events per message: sent, delivered, opened, clicked, and a bounce for one in fifty
-- (else another open). Event e belongs to message (e - 1) / 5 + 1.
INSERT INTO webhook_events (provider, event_id, event_type, message_id, occurred_at, received_at, processed_at,
                            awaiting_start, relayed_at, picked_at, quarantined_at, quarantine_stage, source)
SELECT p.provider, 'evt_' || e,
       CASE e % 5 WHEN 1 THEN 'email.sent' WHEN 2 THEN 'email.delivered' WHEN 3 THEN 'email.opened' WHEN 4 THEN 'email.clicked'
                  ELSE CASE WHEN m % 50 = 0 THEN 'email.bounced' ELSE 'email.opened' END END,
       'msg_' || m,
       t - interval '2 seconds', t,
       CASE WHEN e > :events - 500 THEN NULL ELSE t + interval '1 second' END,
       false, t, t,
       CASE WHEN e % 10007 = 0 THEN t + interval '1 second' END,
       CASE WHEN e % 10007 = 0 THEN 'Process' END,
       CASE WHEN e % 1009 = 0 THEN 'temporal' END
FROM generate_series(1, :events) AS e
CROSS JOIN LATERAL (SELECT (e - 1) / 5 + 1 AS m,
                           now() - interval '30 days' + (e * interval '30 days' / :events) AS t) x
JOIN bench_providers p ON p.n = x.m % 13;

INSERT INTO message_events (provider, event_id, message_id, event_type, status, occurred_at, received_at, outcome,
                            from_status, to_status, recipient, version)
SELECT w.provider, w.event_id, w.message_id, w.event_type, NULL, w.occurred_at, w.received_at + interval '1 second',
       CASE WHEN e % 20011 = 0 THEN 'flagged'
            WHEN e % 5 IN (1, 2) THEN CASE WHEN e % 40 = 2 THEN 'stale' ELSE 'moved' END
            WHEN e % 5 = 0 AND w.event_type = 'email.bounced' THEN 'moved'
            ELSE 'counted' END,
       '', '', '', 1
FROM webhook_events w CROSS JOIN LATERAL (SELECT substr(w.event_id, 5)::bigint AS e) x
WHERE w.processed_at IS NOT NULL AND w.quarantined_at IS NULL;

-- One notification per delivered event to sink app.
INSERT INTO notifications (id, provider, event_id, sink, type, status, attempts, created_at, sent_at, updated_at, message_id, version)
SELECT 'ntf_' || w.event_id, w.provider, w.event_id, 'app', 'message.status_changed',
       CASE WHEN right(w.event_id, 2) = '02' THEN 'failed' ELSE 'sent' END, 1, w.received_at, w.received_at, w.received_at, w.message_id, 2
FROM webhook_events w
WHERE w.event_type = 'email.delivered';

-- A busy message: BUSY events (opens and clicks of a newsletter), each notified to two sinks.
INSERT INTO messages (provider, message_id, status, recipient, version) VALUES ('postscale', 'msg_busy', 'delivered', 'busy@example.com', 3);
INSERT INTO webhook_events (provider, event_id, event_type, message_id, occurred_at, received_at, processed_at, relayed_at, picked_at)
SELECT 'postscale', 'evt_busy_' || i, CASE WHEN i % 2 = 0 THEN 'email.opened' ELSE 'email.clicked' END, 'msg_busy',
       now() - interval '10 days' + i * interval '1 minute' - (i % 7) * interval '1 minute',
       now() - interval '10 days' + i * interval '1 minute', now() - interval '10 days' + i * interval '1 minute' + interval '1 second',
       now() - interval '10 days' + i * interval '1 minute', now() - interval '10 days' + i * interval '1 minute'
FROM generate_series(1, :busy) AS i;
INSERT INTO message_events (provider, event_id, message_id, event_type, occurred_at, received_at, outcome, version)
SELECT provider, event_id, message_id, event_type, occurred_at, received_at, 'counted', 3
FROM webhook_events WHERE provider = 'postscale' AND message_id = 'msg_busy';
INSERT INTO notifications (id, provider, event_id, sink, type, status, attempts, last_error, created_at, updated_at, message_id, version)
SELECT 'ntf_' || s || '_' || w.event_id, w.provider, w.event_id, s, 'message.opened',
       CASE WHEN s = 'crm' THEN 'parked' ELSE 'sent' END, CASE WHEN s = 'crm' THEN 3 ELSE 1 END,
       CASE WHEN s = 'crm' THEN 'sink responded 503 Service Unavailable' END, w.received_at, w.received_at, w.message_id, 3
FROM webhook_events w CROSS JOIN (VALUES ('app'), ('crm')) AS sinks(s)
WHERE w.provider = 'postscale' AND w.message_id = 'msg_busy';

INSERT INTO rejected_requests (endpoint, provider, received_at, cause, status, reason, remote_addr, size, headers, body)
SELECT CASE WHEN i % 3 = 0 THEN 'sendgrid' ELSE 'postscale' END, 'postscale',
       now() - interval '7 days' + i * interval '7 days' / :rejected,
       CASE i % 4 WHEN 0 THEN 'bad_signature' WHEN 1 THEN 'stale_timestamp' WHEN 2 THEN 'unparsable' ELSE 'invalid_event' END,
       CASE WHEN i % 4 < 2 THEN 401 ELSE 400 END, 'refused', '203.0.113.' || (i % 250), 512, '{}', convert_to(repeat('x', 512), 'UTF8')
FROM generate_series(1, :rejected) AS i;

INSERT INTO audit_log (at, action, actor, via, target, status, result)
SELECT now() - interval '365 days' + i * interval '365 days' / :audit,
       (ARRAY['sink.pause','sink.resume','sink.redeliver','event.replay','redrive','message.correction','suppression.lift','erasure','rejection.retry'])[i % 9 + 1],
       CASE WHEN i % 5 = 0 THEN 'cli:ops' ELSE 'token-' || (i % 7) END, CASE WHEN i % 5 = 0 THEN 'cli' ELSE 'api' END,
       'app', 200, 'ok'
FROM generate_series(1, :audit) AS i;

ANALYZE;
