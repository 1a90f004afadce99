// Package store is mailhook's PostgreSQL persistence: the durable webhook dedupe, each
// message's precedence-governed state and history, and the notification outbox. Every write
// is idempotent per provider event, because Temporal activities are retried.
package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/erasure"
)

// DefaultMaxConns is the connection pool's size unless the database URL sets pool_max_conns.
const DefaultMaxConns = 16

// Store is mailhook's database: one pool, and a part per entity over it, each with its own
// statements (the file of its name). It is safe for concurrent use.
type Store struct {
	db *db

	// Events is the event's way through: stored under its key, taken up and applied to its
	// message, marked processed.
	Events *Events
	// Inbox is the accepted events waiting for their workflow's start: the relay's queue.
	Inbox *Inbox
	// Quarantined holds the events that cannot be processed as they are.
	Quarantined *Quarantined
	// Messages are the messages' states and histories.
	Messages *Messages
	// Notifications are the (event, sink, type) deliveries and their bodies.
	Notifications *Notifications
	// Sinks are the sinks' circuits, limits and parked notifications.
	Sinks *Sinks
	// Suppressions are the suppressed addresses and their lifts.
	Suppressions *Suppressions
	// Retention is the partitions and what retention removes.
	Retention *Retention
	// Counts are the daily counts, the providers' counts and the backfills' progress.
	Counts *Counts
	// Replays are the stuck events redrive finds and the operator's replays.
	Replays *Replays
	// Nonces are the signature tokens bound against replays.
	Nonces *Nonces
	// Erasures are the erasure jobs and their audit rows.
	Erasures *Erasures
	// Rejected are the refused webhook requests kept with their cause.
	Rejected *Rejected
	// Explorer reads events and a message's timeline for operators.
	Explorer *Explorer
	// Audit is the operators' audit trail.
	Audit *Audit
	// Sessions are the console's signed-out sessions.
	Sessions *Sessions
}

// db is what every part shares: the pool and the Options given to Open, read without a lock by
// every call.
type db struct {
	pool             *pgxpool.Pool
	partitioning     domain.Partitioning
	hasher           erasure.Hasher
	sessionURL       string
	stripOnProcessed bool
	priorKeys        erasure.PriorKeys
	bodies           BodyCodec
}

// BodyCodec seals what the store keeps of a refused request's body (codec.Codec: the payload
// codec of temporal.codec), and opens it again.
type BodyCodec interface {
	Seal(b []byte) ([]byte, error)
	Open(sealed []byte) ([]byte, error)
}

// The parts, each a view of db.
type (
	Events        struct{ *db }
	Inbox         struct{ *db }
	Quarantined   struct{ *db }
	Messages      struct{ *db }
	Notifications struct{ *db }
	Sinks         struct{ *db }
	Suppressions  struct{ *db }
	Retention     struct{ *db }
	Counts        struct{ *db }
	Replays       struct{ *db }
	Nonces        struct{ *db }
	Erasures      struct{ *db }
	Rejected      struct{ *db }
	Explorer      struct{ *db }
	Audit         struct{ *db }
)

func newStore(d *db) *Store {
	return &Store{db: d, Events: &Events{d}, Inbox: &Inbox{d}, Quarantined: &Quarantined{d}, Messages: &Messages{d},
		Notifications: &Notifications{d}, Sinks: &Sinks{d}, Suppressions: &Suppressions{d}, Retention: &Retention{d},
		Counts: &Counts{d}, Replays: &Replays{d}, Nonces: &Nonces{d}, Erasures: &Erasures{d}, Rejected: &Rejected{d},
		Explorer: &Explorer{d}, Audit: &Audit{d}, Sessions: &Sessions{d}}
}

// Options configures a Store. The zero value is a store with every optional behaviour off:
// DefaultPartitioning, erasure refused. (The rules an event is applied under, the suppression
// scopes and the soft-bounce escalation included, are the caller's: domain.Rules.)
type Options struct {
	// TransactionPooler makes the pool work through a transaction-mode pooler (PgBouncer's
	// pool_mode = transaction), where consecutive transactions of one client connection may run
	// on different server connections. Nothing of the store's own is session-scoped (its
	// advisory lock is pg_advisory_xact_lock, settings are not SET, there is no LISTEN or
	// temporary table); what is left is pgx's default statement cache: it prepares each query
	// once per connection under a name, and through the pooler that name is missing on the next
	// server connection ("prepared statement ... does not exist") or taken on it ("already
	// exists"). So queries run in QueryExecModeExec: the unnamed statement, parsed and executed
	// in one round trip, with the argument types taken from their Go types. A
	// default_query_exec_mode the URL names is kept: the URL is the operator's explicit choice.
	// Migrations never take this path: their session lock needs database.listen_url.
	//
	// It is an option, not only the documented URL parameter, so that database.pooler states the
	// deployment once: the config can then insist on a separate session-mode listen_url.
	TransactionPooler bool
	// Partitioning sizes the partitions an insert creates when it finds none (config
	// retention); zero: DefaultPartitioning.
	Partitioning domain.Partitioning
	// ErasureHasher keys the hash an erased address leaves behind (config erasure.hash_key);
	// zero: erasure is refused, and suppressions are looked up by the plain address only.
	ErasureHasher erasure.Hasher
	// SessionURL is a session-mode connection (config database.listen_url) for retention's DDL,
	// which sets lock_timeout on its own connection: through a transaction-mode pooler that
	// setting would land on whichever server connection ran it. Empty: the pool's own server.
	SessionURL string
	// StripBodiesWhenProcessed removes an inbound email's body in the transaction that marks its
	// event processed, once all its notifications are sent (config retention.inbound_bodies: 0).
	// False: a longer period is enforced by the retention run's StripInboundBodies.
	StripBodiesWhenProcessed bool
	// Tracer, when set, traces the pool's queries (telemetry.PgxTracer, set by the process when
	// tracing is on); nil: no tracing. The store knows nothing of how spans are made or exported.
	Tracer pgx.QueryTracer
	// ErasurePriorKeys are the providers' rules for the keys versions before 2026-12-02 built
	// with the address (keys_legacy.go in internal/erasure), which an erasure re-keys; zero:
	// such keys are not re-keyed.
	ErasurePriorKeys erasure.PriorKeys
	// StartUnavailable opens the store while PostgreSQL cannot be reached (IsUnavailable: down,
	// restarting, read-only): a process deployed or restarted during an outage starts, accepts
	// through Temporal and catches up when PostgreSQL is back, as the processes already running
	// do. A server that answers and refuses (a wrong password, a missing database) still fails
	// the start.
	StartUnavailable bool
	// BodyCodec, when set (temporal.codec configured), seals the kept bodies of refused webhook
	// requests; nil keeps them as they came. Bodies sealed earlier are opened whatever it is now,
	// as long as the key they name is still configured.
	BodyCodec BodyCodec
}

// Open connects to the database at databaseURL and checks that it answers. It does not
// migrate: call Migrate first.
func Open(ctx context.Context, databaseURL string, o Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("open store: parse database url: %w", err)
	}
	if o.TransactionPooler && !strings.Contains(databaseURL, "default_query_exec_mode") {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	if !strings.Contains(databaseURL, "pool_max_conns") {
		// pgx's default (4, or the number of CPUs) is shared here by the accept path's writers,
		// the handoff, the relay and, in `serve`, every activity of the worker: requests queued
		// for a connection, not for PostgreSQL. pool_max_conns in the URL overrides this.
		cfg.MaxConns = DefaultMaxConns
	}
	if o.Tracer != nil {
		cfg.ConnConfig.Tracer = o.Tracer
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	// The pool connects lazily; ping so a wrong URL fails at start-up, not on the first event.
	if err := pool.Ping(ctx); err != nil && !(o.StartUnavailable && IsUnavailable(err)) {
		pool.Close()
		return nil, fmt.Errorf("open store: ping: %w", err)
	}
	partitioning := o.Partitioning
	if partitioning == (domain.Partitioning{}) {
		partitioning = DefaultPartitioning
	}
	return newStore(&db{
		pool:             pool,
		partitioning:     partitioning,
		hasher:           o.ErasureHasher,
		sessionURL:       o.SessionURL,
		stripOnProcessed: o.StripBodiesWhenProcessed,
		priorKeys:        o.ErasurePriorKeys,
		bodies:           o.BodyCodec,
	}), nil
}

// Close closes every connection; it waits for connections in use to be released.
func (s *Store) Close() { s.db.pool.Close() }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.db.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping store: %w", err)
	}
	return nil
}

// RecordEvent durably records a received event, once per (provider, event_id). A duplicate
// delivery finds the existing row: Inserted is false, and AlreadyProcessed tells whether the
// first delivery finished.
func (s *Events) RecordEvent(ctx context.Context, ev domain.Event) (domain.RecordResult, error) {
	payload, event := payloadColumns(ev)
	var inserted bool
	err := withPartitions(ctx, s.db, func() error {
		return s.pool.QueryRow(ctx, qInsertWebhookEvent,
			ev.Provider, ev.EventID, ev.Type, nullString(ev.MessageID), nullTime(ev.OccurredAt), payload, event,
		).Scan(&inserted)
	})
	switch {
	case err == nil:
		return domain.RecordResult{Inserted: true}, nil
	case !errors.Is(err, pgx.ErrNoRows):
		return domain.RecordResult{}, fmt.Errorf("record event %s:%s: %w", ev.Provider, ev.EventID, err)
	}

	// ON CONFLICT waited for any concurrent inserter to commit, so this new statement sees
	// the row that won.
	var processed bool
	err = s.pool.QueryRow(ctx, qWebhookEventProcessed, ev.Provider, ev.EventID).Scan(&processed)
	if err != nil {
		return domain.RecordResult{}, fmt.Errorf("record event %s:%s: read existing: %w", ev.Provider, ev.EventID, err)
	}
	return domain.RecordResult{AlreadyProcessed: processed}, nil
}

// MarkProcessed records that the event's processing finished, so a later duplicate delivery
// is acknowledged without running again. Marking twice keeps the first time.
// sent are notifications its run delivered and left for this step to mark sent (as
// MarkNotificationSent would): they are marked in the same statement.
// With retention.inbound_bodies 0 (Options.StripBodiesWhenProcessed), an inbound email's body
// is removed in the same transaction once all its notifications are sent.
func (s *Events) MarkProcessed(ctx context.Context, provider, eventID string, sent ...string) error {
	query, args := qMarkProcessed, []any{provider, eventID}
	switch len(sent) {
	case 0:
	case 1:
		query, args = qMarkProcessedSentOne, append(args, sent[0])
	default:
		query, args = qMarkProcessedSent, append(args, sent)
	}
	var err error
	if s.stripOnProcessed {
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			var at time.Time
			if err := tx.QueryRow(ctx, query, args...).Scan(&at); err != nil {
				return err
			}
			return stripProcessed(ctx, s.db, tx, provider, eventID)
		})
	} else {
		var at time.Time
		err = s.pool.QueryRow(ctx, query, args...).Scan(&at)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		err = domain.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("mark processed %s:%s: %w", provider, eventID, err)
	}
	return nil
}

// GetMessage returns a message's state and its history in arrival order. It returns an error
// wrapping domain.ErrNotFound when no event has been applied to the message.
func (s *Messages) GetMessage(ctx context.Context, provider, messageID string) (Message, error) {
	var m Message
	// One snapshot for both reads, so the history matches the state it is shown with.
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error {
			var err error
			m, err = getMessage(ctx, tx, provider, messageID)
			return err
		})
	if err != nil {
		return Message{}, fmt.Errorf("get message %s:%s: %w", provider, messageID, err)
	}
	return m, nil
}

// GetMessageState returns a message's state without its history (Events empty, Notifications
// nil): one row, however many events the message has. It returns an error wrapping
// domain.ErrNotFound when no event has been applied to the message.
func (s *Messages) GetMessageState(ctx context.Context, provider, messageID string) (Message, error) {
	m, err := getMessageState(ctx, s.pool, provider, messageID)
	if err != nil {
		return Message{}, fmt.Errorf("get message state %s:%s: %w", provider, messageID, err)
	}
	return m, nil
}

func getMessage(ctx context.Context, tx pgx.Tx, provider, messageID string) (Message, error) {
	m, err := getMessageState(ctx, tx, provider, messageID)
	if err != nil {
		return Message{}, err
	}
	return getMessageHistory(ctx, tx, m)
}

func getMessageState(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, provider, messageID string) (Message, error) {
	var (
		m      Message
		bounce domain.Bounce
	)
	err := q.QueryRow(ctx, qGetMessage, provider, messageID).Scan(
		&m.Provider, &m.MessageID, &m.Status, &m.BounceType, &m.Recipient, &m.Version,
		&m.Unsubscribed, &m.UnsubscribedAt, &m.Opens, &m.Clicks, &m.FirstOpenedAt,
		&m.FirstClickedAt, &m.CorrectedAt, &m.CreatedAt, &m.UpdatedAt,
		&bounce.SMTPCode, &bounce.EnhancedCode, &bounce.Diagnostic, &bounce.Category,
	)
	if errors.Is(err, pgx.ErrNoRows) {
		return Message{}, domain.ErrNotFound
	}
	if err != nil {
		return Message{}, err
	}
	m.Bounce = bounceDetails(bounce)
	m.Events = []MessageEvent{}
	return m, nil
}

func getMessageHistory(ctx context.Context, tx pgx.Tx, m Message) (Message, error) {
	provider, messageID := m.Provider, m.MessageID
	rows, err := tx.Query(ctx, qMessageHistory, provider, messageID)
	if err != nil {
		return Message{}, fmt.Errorf("history: %w", err)
	}
	// Non-nil so the API renders an empty history as [] rather than null.
	m.Events = []MessageEvent{}
	for rows.Next() {
		var (
			e          MessageEvent
			occurredAt *time.Time
			bounce     domain.Bounce
		)
		if err := rows.Scan(&e.EventID, &e.Type, &e.Status, &occurredAt, &e.ReceivedAt,
			&e.Outcome, &e.From, &e.To, &e.Version, &e.Actor, &e.Note, &e.Suppressed,
			&bounce.SMTPCode, &bounce.EnhancedCode, &bounce.Diagnostic, &bounce.Category); err != nil {
			rows.Close()
			return Message{}, fmt.Errorf("history: %w", err)
		}
		e.Bounce = bounceDetails(bounce)
		if occurredAt != nil {
			e.OccurredAt = *occurredAt
		}
		e.Moved = e.Outcome == domain.OutcomeMoved
		m.Events = append(m.Events, e)
	}
	if err := rows.Err(); err != nil {
		return Message{}, fmt.Errorf("history: %w", err)
	}
	rows, err = tx.Query(ctx, qMessageNotifications, provider, messageID)
	if err != nil {
		return Message{}, fmt.Errorf("notifications: %w", err)
	}
	m.Notifications, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (MessageNotification, error) {
		var n MessageNotification
		err := row.Scan(&n.ID, &n.EventID, &n.Sink, &n.Type, &n.Status, &n.Attempts, &n.LastError,
			&n.CreatedAt, &n.ParkedAt, &n.ParkReason, &n.SentAt)
		return n, err
	})
	if err != nil {
		return Message{}, fmt.Errorf("notifications: %w", err)
	}
	return m, nil
}

// nullString maps "" to SQL NULL for optional text columns.
func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// nullTime maps the zero time (provider did not say) to SQL NULL.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// Backlog counts recorded events that are not processed yet and returns when the oldest was
// received (zero time when there is none). The partial index on unprocessed rows keeps it cheap.
func (s *Inbox) Backlog(ctx context.Context) (int64, time.Time, error) {
	var (
		n      int64
		oldest *time.Time
	)
	if err := s.pool.QueryRow(ctx, qBacklog).Scan(&n, &oldest); err != nil {
		return 0, time.Time{}, fmt.Errorf("backlog: %w", err)
	}
	if oldest == nil {
		return n, time.Time{}, nil
	}
	return n, *oldest, nil
}
