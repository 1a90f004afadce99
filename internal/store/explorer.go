package store

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/net/idna"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/mailaddr"
)

// SourceTemporal is webhook_events.source of an event accepted through Temporal while
// PostgreSQL was down: its run's RecordAccepted inserted the row.
const SourceTemporal = "temporal"

// EventFilter selects events for the explorer (GET /v1/events). Zero fields select everything.
type EventFilter struct {
	// Providers keeps the events recorded under one of these providers (an endpoint's namespace,
	// or its provider's name); empty: all.
	Providers []string
	Type      string
	// Outcome keeps the events whose processing recorded it (domain.Outcome); an event not
	// processed yet has none.
	Outcome string
	// Recipient keeps the events of the messages whose recipient has this address's key
	// (mailaddr.Key, as suppressions are keyed). An erased recipient is found nowhere.
	Recipient string
	MessageID string
	// Since and Until bound received_at: Since <= received_at < Until.
	Since, Until time.Time
	// Quarantined and ThroughTemporal keep the events that are (true) or are not (false).
	Quarantined     *bool
	ThroughTemporal *bool
	// After is the NextAfter of the previous page; Limit the page's size.
	After string
	Limit int
}

// ExplorerEvent is one event as the explorer lists it: its key, what it is, where it stands and
// what processing did with it. No payload, no address.
type ExplorerEvent struct {
	Provider    string     `json:"provider"`
	EventID     string     `json:"event_id"`
	Type        string     `json:"event_type"`
	MessageID   string     `json:"message_id,omitempty"`
	OccurredAt  *time.Time `json:"occurred_at,omitempty"`
	ReceivedAt  time.Time  `json:"received_at"`
	ProcessedAt *time.Time `json:"processed_at,omitempty"`
	// State is waiting (not started yet), started (its run has not finished), processed or
	// quarantined.
	State   string `json:"state"`
	Outcome string `json:"outcome,omitempty"`
	// AppliedAt is when processing recorded its outcome.
	AppliedAt       *time.Time `json:"applied_at,omitempty"`
	Version         *int64     `json:"version,omitempty"`
	QuarantineStage string     `json:"quarantine_stage,omitempty"`
	// Source is how the event came in when not as a webhook: temporal (accepted through
	// Temporal while PostgreSQL was down) or backfill.
	Source     string `json:"source,omitempty"`
	WorkflowID string `json:"workflow_id"`
}

// Event states.
const (
	EventWaiting     = "waiting"
	EventStarted     = "started"
	EventProcessed   = "processed"
	EventQuarantined = "quarantined"
)

// cursor is the explorer's keyset position: the last row's (time, provider, event_id), the time
// being received_at, or, in the applied order (Applied), when processing recorded its outcome.
type cursor struct {
	At       time.Time
	Provider string
	EventID  string
	Applied  bool
}

// encodeCursor makes a position opaque: a caller passes it back and never builds one.
func encodeCursor(c cursor) string {
	parts := []string{strconv.FormatInt(c.At.UnixMicro(), 10), c.Provider, c.EventID}
	if c.Applied {
		parts = append(parts, "applied")
	}
	b, _ := json.Marshal(parts)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	var parts []string
	if err == nil {
		err = json.Unmarshal(b, &parts)
	}
	if err != nil || len(parts) < 3 || len(parts) > 4 || len(parts) == 4 && parts[3] != "applied" {
		return cursor{}, ErrBadCursor
	}
	us, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil {
		return cursor{}, ErrBadCursor
	}
	return cursor{At: time.UnixMicro(us).UTC(), Provider: parts[1], EventID: parts[2], Applied: len(parts) == 4}, nil
}

// RareOutcomes are the outcomes migration 00023's partial index holds: few events have them, so
// the explorer walks that index, in the order processing recorded them, instead of the newest
// events.
var RareOutcomes = []string{string(domain.OutcomeStale), string(domain.OutcomeFlagged), string(domain.OutcomeDuplicate),
	string(domain.OutcomeInbound), string(domain.OutcomeUnknownType)}

// explorerColumns are what a page reads of an event and its processing.
const explorerColumns = `w.provider, w.event_id, w.event_type, COALESCE(w.message_id, ''), w.occurred_at, w.received_at,
       w.processed_at, w.awaiting_start, w.quarantined_at IS NOT NULL, COALESCE(w.quarantine_stage, ''),
       COALESCE(w.source, ''), COALESCE(m.outcome, ''), m.received_at, m.version`

// RecipientMessages returns the (provider, message_id) of the messages whose recipient has
// address's key: an indexed read of the candidates SQL can find (mailhook_address_key,
// migration 00023), kept when Go's mailaddr.Key agrees. An erased recipient is ” and matches
// nothing.
func (s *Explorer) RecipientMessages(ctx context.Context, address string) (providers, messageIDs []string, err error) {
	key := mailaddr.Key(address)
	if key == "" {
		return nil, nil, nil
	}
	rows, err := s.pool.Query(ctx, `
SELECT provider, message_id, recipient FROM messages
WHERE recipient <> '' AND mailhook_address_key(recipient) = ANY (SELECT lower(normalize(k, NFC)) FROM unnest($1::text[]) AS k)`,
		addressKeyForms(key))
	if err != nil {
		return nil, nil, fmt.Errorf("recipient's messages: %w", err)
	}
	var p, m, r string
	_, err = pgx.ForEachRow(rows, []any{&p, &m, &r}, func() error {
		if mailaddr.Key(r) == key {
			providers, messageIDs = append(providers, p), append(messageIDs, m)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("recipient's messages: %w", err)
	}
	return providers, messageIDs, nil
}

// addressKeyForms are the spellings of key's domain a stored recipient may have: the ASCII form
// mailaddr.Key gives and, for an internationalized domain, its Unicode form.
func addressKeyForms(key string) []string {
	forms := []string{key}
	if at := strings.LastIndexByte(key, '@'); at >= 0 {
		if u, err := idna.ToUnicode(key[at+1:]); err == nil && u != key[at+1:] {
			forms = append(forms, key[:at+1]+u)
		}
	}
	return forms
}

// ListEvents returns a page of events newest first, in (received_at, provider, event_id) order,
// and the cursor of the next page ("" on the last). Keyset paging: a page starts strictly after
// the previous page's last row, so rows inserted meanwhile never shift a page, and none is seen
// twice or skipped (a newer row lands before the first page, not inside the walk). Filtered by a
// rare outcome (RareOutcomes), the order is (applied_at, provider, event_id) instead: the order
// of the index that finds them.
func (s *Explorer) ListEvents(ctx context.Context, f EventFilter) ([]ExplorerEvent, string, error) {
	var l listQuery
	if f.Recipient != "" {
		providers, messages, err := s.RecipientMessages(ctx, f.Recipient)
		if err != nil {
			return nil, "", fmt.Errorf("list events: %w", err)
		}
		if len(messages) == 0 {
			return []ExplorerEvent{}, "", nil
		}
		l.and(fmt.Sprintf("(w.message_id, w.provider) IN (SELECT * FROM unnest(%s::text[], %s::text[]))", l.arg(messages), l.arg(providers)))
	}
	switch len(f.Providers) {
	case 0:
	case 1:
		l.and("w.provider = " + l.arg(f.Providers[0]))
	default:
		l.and("w.provider = ANY(" + l.arg(f.Providers) + "::text[])")
	}
	if f.Type != "" {
		l.and("w.event_type = " + l.arg(f.Type))
	}
	if f.MessageID != "" {
		l.and("w.message_id = " + l.arg(f.MessageID))
	}
	if f.Outcome != "" {
		l.and("m.outcome = " + l.arg(f.Outcome))
	}
	if !f.Since.IsZero() {
		l.and("w.received_at >= " + l.arg(f.Since))
	}
	if !f.Until.IsZero() {
		l.and("w.received_at < " + l.arg(f.Until))
	}
	if f.Quarantined != nil {
		if *f.Quarantined {
			l.and("w.quarantined_at IS NOT NULL")
		} else {
			l.and("w.quarantined_at IS NULL")
		}
	}
	if f.ThroughTemporal != nil {
		if *f.ThroughTemporal {
			l.and("w.source = '" + SourceTemporal + "'")
		} else {
			l.and("w.source IS DISTINCT FROM '" + SourceTemporal + "'")
		}
	}
	applied := slices.Contains(RareOutcomes, f.Outcome)
	key := "w" // the table whose (received_at, provider, event_id) orders the page
	if applied {
		key = "m"
	}
	if f.After != "" {
		c, err := decodeCursor(f.After)
		if err != nil || c.Applied != applied {
			return nil, "", fmt.Errorf("list events: %w", ErrBadCursor)
		}
		l.after(true, key+".received_at", []string{key + ".provider", key + ".event_id"}, c.At, c.Provider, c.EventID)
	}
	join := "LEFT JOIN"
	if f.Outcome != "" {
		join = "JOIN"
	}
	q := "SELECT " + explorerColumns + "\nFROM webhook_events w " + join +
		" message_events m ON m.provider = w.provider AND m.event_id = w.event_id\n" + l.whereClause() +
		fmt.Sprintf("ORDER BY %[1]s.received_at DESC, %[1]s.provider DESC, %[1]s.event_id DESC\nLIMIT %[2]s", key, l.arg(f.Limit+1))
	args := l.args
	var out []ExplorerEvent
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		// A page is a short walk of an index that stops at the limit: parallel workers cost more
		// to start than the walk (tens of ms on a busy host) and the planner, which prices the
		// whole walk, picks them for the rare filters.
		if _, err := tx.Exec(ctx, `SET LOCAL max_parallel_workers_per_gather = 0`); err != nil {
			return err
		}
		// Planned for these values every time (no cached generic plan): a provider or type
		// that is most of the table and one that is rare want different plans, and the partial
		// index of rare outcomes is usable only when the planner sees the value.
		rows, err := tx.Query(ctx, q, append([]any{pgx.QueryExecModeExec}, args...)...)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, scanExplorerEvent)
		return err
	})
	if err != nil {
		return nil, "", fmt.Errorf("list events: %w", err)
	}
	next := ""
	if len(out) > f.Limit {
		out = out[:f.Limit]
		last := out[len(out)-1]
		c := cursor{At: last.ReceivedAt, Provider: last.Provider, EventID: last.EventID}
		if applied {
			c.At, c.Applied = *last.AppliedAt, true
		}
		next = encodeCursor(c)
	}
	return out, next, nil
}

func scanExplorerEvent(row pgx.CollectableRow) (ExplorerEvent, error) {
	var (
		e                    ExplorerEvent
		waiting, quarantined bool
	)
	err := row.Scan(&e.Provider, &e.EventID, &e.Type, &e.MessageID, &e.OccurredAt, &e.ReceivedAt, &e.ProcessedAt,
		&waiting, &quarantined, &e.QuarantineStage, &e.Source, &e.Outcome, &e.AppliedAt, &e.Version)
	e.State = eventState(e.ProcessedAt != nil, waiting, quarantined)
	e.WorkflowID = domain.Event{Provider: e.Provider, EventID: e.EventID}.Key()
	return e, err
}

func eventState(processed, waiting, quarantined bool) string {
	switch {
	case quarantined:
		return EventQuarantined
	case processed:
		return EventProcessed
	case waiting:
		return EventWaiting
	}
	return EventStarted
}

// Timeline is a page of a message's story: its state, its events in arrival order with what
// precedence did with each, their notifications per sink, and the workflows around them.
type Timeline struct {
	Provider  string        `json:"provider"`
	MessageID string        `json:"message_id"`
	Status    domain.Status `json:"status,omitempty"`
	Version   int64         `json:"version"`
	Recipient string        `json:"recipient,omitempty"`
	// Events in arrival order (received_at, then event id).
	Events []TimelineEvent `json:"events"`
	// OccurrenceOrder is the page's events' ids in the order they occurred (provider time; an
	// event without one last, in arrival order): the order precedence ranks within a status.
	OccurrenceOrder []string       `json:"occurrence_order"`
	Sinks           []TimelineSink `json:"sinks"`
	// Workflows are the replays and the sinks' drainers (each event names its own run).
	Workflows []TimelineWorkflow `json:"workflows"`
	// NextAfter pages to the events that arrived after this page's, PrevBefore to those that
	// arrived before it; "" when there are none.
	NextAfter  string `json:"next_after"`
	PrevBefore string `json:"prev_before"`
	found      bool
}

// Timeline pages: the events a page holds when TimelinePage.Limit is 0, and at most.
const (
	DefaultTimelineLimit = 100
	MaxTimelineLimit     = 1000
)

// TimelinePage is the part of a message's timeline to read: at most Limit events in arrival
// order, the first ones, or those after the cursor After (a NextAfter), or the last ones before
// the cursor Before (a PrevBefore); with each event its notifications and replays.
type TimelinePage struct {
	Limit         int
	After, Before string
}

// TimelineEvent is one event of a message and what became of it.
type TimelineEvent struct {
	EventID    string     `json:"event_id"`
	Type       string     `json:"event_type"`
	OccurredAt *time.Time `json:"occurred_at,omitempty"`
	ReceivedAt time.Time  `json:"received_at"`
	// OccurrenceIndex is its place in OccurrenceOrder.
	OccurrenceIndex int    `json:"occurrence_index"`
	State           string `json:"state"`
	// Precedence is what applying it did: applied (it moved or advanced the message, or counted),
	// stale (an event with a greater order key had decided), correction (an operator's), or
	// none (nothing to apply: an unknown type, an inbound email, a duplicate), or pending (not
	// applied yet), quarantined.
	Precedence string        `json:"precedence"`
	Outcome    string        `json:"outcome,omitempty"`
	Status     domain.Status `json:"status,omitempty"`
	From       domain.Status `json:"from,omitempty"`
	To         domain.Status `json:"to,omitempty"`
	// Version is the message's version after it: what its notifications carry.
	Version         *int64     `json:"version,omitempty"`
	AppliedAt       *time.Time `json:"applied_at,omitempty"`
	ProcessedAt     *time.Time `json:"processed_at,omitempty"`
	Actor           string     `json:"actor,omitempty"`
	QuarantineStage string     `json:"quarantine_stage,omitempty"`
	Source          string     `json:"source,omitempty"`
	WorkflowID      string     `json:"workflow_id"`
	// WorkflowURL opens its run in the Temporal UI; absent without temporal.ui_url.
	WorkflowURL string `json:"workflow_url,omitempty"`
}

// Precedence verdicts of a timeline's events.
const (
	PrecedenceApplied     = "applied"
	PrecedenceStale       = "stale"
	PrecedenceCorrection  = "correction"
	PrecedenceNone        = "none"
	PrecedencePending     = "pending"
	PrecedenceQuarantined = "quarantined"
)

// precedenceOf is what applying an event with outcome did.
func precedenceOf(eventType, outcome string, quarantined bool) string {
	switch {
	case eventType == domain.CorrectionType && outcome != "":
		return PrecedenceCorrection
	case outcome == string(domain.OutcomeStale):
		return PrecedenceStale
	case outcome == string(domain.OutcomeMoved), outcome == string(domain.OutcomeAdvanced),
		outcome == string(domain.OutcomeCounted), outcome == string(domain.OutcomeFlagged):
		return PrecedenceApplied
	case outcome != "":
		return PrecedenceNone
	case quarantined:
		return PrecedenceQuarantined
	}
	return PrecedencePending
}

// TimelineSink is one sink's notifications of the message, oldest first.
type TimelineSink struct {
	Sink          string                 `json:"sink"`
	Notifications []TimelineNotification `json:"notifications"`
}

// TimelineNotification is one notification: its state and attempts, without its body.
type TimelineNotification struct {
	ID        string `json:"id"`
	EventID   string `json:"event_id"`
	Type      string `json:"type"`
	Status    string `json:"status"`
	Attempts  int    `json:"attempts"`
	Version   *int64 `json:"version,omitempty"`
	LastError string `json:"last_error,omitempty"`
	// ErrorClass sorts LastError (delivery.ErrorClass).
	ErrorClass string     `json:"error_class,omitempty"`
	ParkReason string     `json:"park_reason,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	ParkedAt   *time.Time `json:"parked_at,omitempty"`
	SentAt     *time.Time `json:"sent_at,omitempty"`
	UpdatedAt  time.Time  `json:"updated_at"`
}

// TimelineWorkflow is a Temporal workflow around the message other than its events' own runs
// (each event names its run, workflow_id): a replay of one of its events, or the drainer of a
// sink holding its parked notifications.
type TimelineWorkflow struct {
	WorkflowID string `json:"workflow_id"`
	Kind       string `json:"kind"` // replay, sink
	EventID    string `json:"event_id,omitempty"`
	// URL opens it in the Temporal UI; absent without temporal.ui_url.
	URL string `json:"url,omitempty"`
}

// Timeline returns a page of the message's timeline; domain.ErrNotFound when neither the message
// nor any event of it is known, ErrBadCursor for a cursor it did not give. One snapshot for every
// read, so the parts agree.
func (s *Explorer) Timeline(ctx context.Context, provider, messageID string, page TimelinePage, errorClass func(string) string) (Timeline, error) {
	t := Timeline{Provider: provider, MessageID: messageID, Events: []TimelineEvent{}, OccurrenceOrder: []string{},
		Sinks: []TimelineSink{}, Workflows: []TimelineWorkflow{}}
	if page.Limit <= 0 {
		page.Limit = DefaultTimelineLimit
	}
	page.Limit = min(page.Limit, MaxTimelineLimit)
	if page.After != "" && page.Before != "" {
		return Timeline{}, fmt.Errorf("timeline %s:%s: after and before: %w", provider, messageID, ErrBadCursor)
	}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		return readTimeline(ctx, tx, &t, page, errorClass)
	})
	if err == nil && !t.found {
		err = domain.ErrNotFound
	}
	if err != nil {
		return Timeline{}, fmt.Errorf("timeline %s:%s: %w", provider, messageID, err)
	}
	return t, nil
}

// timelineCursor marks a cursor as a timeline's (cursor.Provider), so that one of another list
// is refused.
const timelineCursor = "timeline"

// The events of a message: those recorded under its id (whatever became of them) and those
// applied to it (a key row pruned by retention.dedupe_keys leaves its history), keyed by
// (arrival time, event id). A page is a keyset range of that key: both sides are read through
// their message's index (webhook_events_message_idx, message_events_message_idx) and the
// range is applied to the joined key, the cursor's time bounding each side's rows first.
const qTimelineEvents = `
SELECT * FROM (
SELECT COALESCE(w.event_id, m.event_id) AS id, COALESCE(w.event_type, m.event_type), COALESCE(w.occurred_at, m.occurred_at),
       COALESCE(w.received_at, m.received_at) AS at, w.processed_at, COALESCE(w.awaiting_start, false),
       COALESCE(w.quarantined_at IS NOT NULL, false), COALESCE(w.quarantine_stage, ''), COALESCE(w.source, ''),
       w.event_id IS NULL, COALESCE(m.outcome, ''), COALESCE(m.status, ''), COALESCE(m.from_status, ''),
       COALESCE(m.to_status, ''), m.version, m.received_at, COALESCE(m.actor, '')
FROM (SELECT * FROM webhook_events WHERE message_id = $2 AND provider = $1) w
FULL JOIN (SELECT * FROM message_events WHERE provider = $1 AND message_id = $2) m ON m.event_id = w.event_id
) e
`

const (
	// The notifications of a page's events, through the (provider, event_id, sink, type) key.
	qTimelineNotifications = `
SELECT id, event_id, sink, type, status, attempts, version, COALESCE(last_error, ''), COALESCE(park_reason, ''),
       created_at, parked_at, sent_at, updated_at
FROM notifications WHERE provider = $1 AND event_id = ANY($2::text[])
ORDER BY sink, created_at, id`

	qTimelineReplays = `SELECT event_id, workflow_id FROM replays WHERE provider = $1 AND event_id = ANY($2::text[]) ORDER BY created_at, n`
)

func readTimeline(ctx context.Context, tx pgx.Tx, t *Timeline, page TimelinePage, errorClass func(string) string) error {
	// As for a page of events: short index reads, which parallel workers only slow down.
	if _, err := tx.Exec(ctx, `SET LOCAL max_parallel_workers_per_gather = 0`); err != nil {
		return err
	}
	err := tx.QueryRow(ctx, `SELECT status, version, recipient FROM messages WHERE provider = $1 AND message_id = $2`,
		t.Provider, t.MessageID).Scan(&t.Status, &t.Version, &t.Recipient)
	switch {
	case err == nil:
		t.found = true
	case !errors.Is(err, pgx.ErrNoRows):
		return err
	}
	l := listQuery{args: []any{t.Provider, t.MessageID}}
	backward := page.Before != "" // the last events before Before, read newest first
	if c := cmp.Or(page.Before, page.After); c != "" {
		c, err := decodeCursor(c)
		if err != nil || c.Provider != timelineCursor || c.Applied {
			return ErrBadCursor
		}
		l.after(backward, "at", []string{"id"}, c.At, c.EventID)
	}
	order := "ORDER BY at, id"
	if backward {
		order = "ORDER BY at DESC, id DESC"
	}
	rows, err := tx.Query(ctx, qTimelineEvents+l.whereClause()+order+" LIMIT "+l.arg(page.Limit+1), l.args...)
	if err != nil {
		return err
	}
	t.Events, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (TimelineEvent, error) {
		var (
			e                             TimelineEvent
			waiting, quarantined, keyGone bool
		)
		err := row.Scan(&e.EventID, &e.Type, &e.OccurredAt, &e.ReceivedAt, &e.ProcessedAt, &waiting, &quarantined,
			&e.QuarantineStage, &e.Source, &keyGone, &e.Outcome, &e.Status, &e.From, &e.To, &e.Version, &e.AppliedAt, &e.Actor)
		e.State = eventState(e.ProcessedAt != nil || keyGone, waiting, quarantined)
		e.Precedence = precedenceOf(e.Type, e.Outcome, quarantined)
		e.WorkflowID = domain.Event{Provider: t.Provider, EventID: e.EventID}.Key()
		return e, err
	})
	if err != nil {
		return err
	}
	more := len(t.Events) > page.Limit
	if more {
		t.Events = t.Events[:page.Limit]
	}
	if backward {
		slices.Reverse(t.Events)
	}
	if len(t.Events) == 0 {
		t.Events = []TimelineEvent{}
		if page.After != "" || page.Before != "" {
			// A cursor names an event of the message: it is known, this page is past its end.
			t.found = true
		}
		return nil
	}
	t.found = true
	first, last := t.Events[0], t.Events[len(t.Events)-1]
	if more || backward {
		t.NextAfter = encodeCursor(cursor{At: last.ReceivedAt, Provider: timelineCursor, EventID: last.EventID})
	}
	if more && backward || !backward && page.After != "" {
		t.PrevBefore = encodeCursor(cursor{At: first.ReceivedAt, Provider: timelineCursor, EventID: first.EventID})
	}
	ids := make([]string, len(t.Events))
	for i, e := range t.Events {
		ids[i] = e.EventID
	}
	t.OccurrenceOrder = occurrenceOrder(t.Events)
	at := make(map[string]int, len(ids))
	for i, id := range ids {
		at[id] = i
	}
	for i, id := range t.OccurrenceOrder {
		t.Events[at[id]].OccurrenceIndex = i
	}
	rows, err = tx.Query(ctx, qTimelineReplays, t.Provider, ids)
	if err != nil {
		return err
	}
	var eventID, workflowID string
	if _, err := pgx.ForEachRow(rows, []any{&eventID, &workflowID}, func() error {
		t.Workflows = append(t.Workflows, TimelineWorkflow{WorkflowID: workflowID, Kind: "replay", EventID: eventID})
		return nil
	}); err != nil {
		return err
	}
	rows, err = tx.Query(ctx, qTimelineNotifications, t.Provider, ids)
	if err != nil {
		return err
	}
	var sink string
	var n TimelineNotification
	if _, err := pgx.ForEachRow(rows, []any{&n.ID, &n.EventID, &sink, &n.Type, &n.Status, &n.Attempts, &n.Version, &n.LastError,
		&n.ParkReason, &n.CreatedAt, &n.ParkedAt, &n.SentAt, &n.UpdatedAt}, func() error {
		if errorClass != nil {
			n.ErrorClass = errorClass(n.LastError)
		}
		if len(t.Sinks) == 0 || t.Sinks[len(t.Sinks)-1].Sink != sink {
			t.Sinks = append(t.Sinks, TimelineSink{Sink: sink})
		}
		last := &t.Sinks[len(t.Sinks)-1]
		last.Notifications = append(last.Notifications, n)
		n = TimelineNotification{}
		return nil
	}); err != nil {
		return err
	}
	// A parked notification is the sink's drainer's to send.
	for _, sk := range t.Sinks {
		if slices.ContainsFunc(sk.Notifications, func(n TimelineNotification) bool { return n.Status == domain.NotificationParked }) {
			t.Workflows = append(t.Workflows, TimelineWorkflow{WorkflowID: "sink:" + sk.Sink, Kind: "sink"})
		}
	}
	return nil
}

// occurrenceOrder sorts the events' ids by when they occurred (an event without a time after
// those with one), then by arrival.
func occurrenceOrder(events []TimelineEvent) []string {
	sorted := slices.Clone(events)
	slices.SortStableFunc(sorted, func(a, b TimelineEvent) int {
		switch {
		case a.OccurredAt == nil && b.OccurredAt == nil:
			return 0
		case a.OccurredAt == nil:
			return 1
		case b.OccurredAt == nil:
			return -1
		}
		return a.OccurredAt.Compare(*b.OccurredAt)
	})
	out := make([]string, len(sorted))
	for i, e := range sorted {
		out[i] = e.EventID
	}
	return out
}
