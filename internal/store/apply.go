package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/redact"
)

// errLostRace means a concurrent attempt of the same event committed its outcome first.
var errLostRace = errors.New("outcome recorded concurrently")

// ApplyStatus applies a status, correction, engagement or unsubscribe event to its message as
// rules decide, records the outcome in the message history and, for a hard bounce, complaint or
// unsubscribe, adds the recipient to the suppressions, in one transaction. It is idempotent per (provider,
// event_id): once an outcome is committed, every later call returns that outcome unchanged, so
// a retried activity reports (and notifies) exactly what the first attempt decided.
func (s *Events) ApplyStatus(ctx context.Context, ev domain.Event, rules domain.Rules) (domain.ApplyResult, error) {
	res, err := s.applyStatus(ctx, ev, rules)
	if err != nil {
		return domain.ApplyResult{}, fmt.Errorf("apply status %s:%s: %w", ev.Provider, ev.EventID, err)
	}
	return res, nil
}

func (s *Events) applyStatus(ctx context.Context, ev domain.Event, rules domain.Rules) (domain.ApplyResult, error) {
	switch {
	case ev.Provider == "" || ev.EventID == "":
		return domain.ApplyResult{}, errors.New("event has no provider or event id")
	case ev.MessageID == "":
		return domain.ApplyResult{}, errors.New("event has no message id")
	}
	if !ev.Kind.AppliesToMessage() {
		return domain.ApplyResult{}, fmt.Errorf("kind %q does not apply to a message", ev.Kind)
	}
	if ev.Kind == domain.KindCorrection && !ev.Status.Known() {
		return domain.ApplyResult{}, fmt.Errorf("correction to unknown status %q", ev.Status)
	}
	// PostgreSQL keeps microseconds. Deciding precedence on the stored precision makes an
	// event compare the same against a key read back from the database as against the same
	// key still in memory, so arrival order cannot change the result.
	ev.OccurredAt = ev.OccurredAt.Truncate(time.Microsecond)

	if res, ok, err := s.recordedOutcome(ctx, ev); err != nil || ok {
		return res, err
	}

	res, err := s.applyInTx(ctx, ev, rules)
	if errors.Is(err, errLostRace) {
		res, ok, err := s.recordedOutcome(ctx, ev)
		if err == nil && !ok {
			err = errors.New("outcome vanished after a concurrent attempt recorded it")
		}
		return res, err
	}
	return res, err
}

func (s *Events) applyInTx(ctx context.Context, ev domain.Event, rules domain.Rules) (res domain.ApplyResult, err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return domain.ApplyResult{}, err
	}
	defer func() {
		if err != nil {
			// The rollback error adds nothing: the connection is discarded if it failed.
			_ = tx.Rollback(ctx)
		}
	}()
	if res, _, _, err = s.applyWithin(ctx, tx, ev, rules, within{}); err != nil {
		return domain.ApplyResult{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return domain.ApplyResult{}, fmt.Errorf("commit: %w", err)
	}
	return res, nil
}

// applyWithin applies ev to its message inside tx, as rules decide: the message row, the
// suppression and the message_events outcome. It returns errLostRace when another attempt of the
// event recorded its outcome first; tx must then be rolled back. What else the outcome's
// statement writes is w's to say; marked reports that it marked the event processed.
func (s *Events) applyWithin(ctx context.Context, tx pgx.Tx, ev domain.Event, rules domain.Rules, w within) (res domain.ApplyResult, written []delivery.Notification, marked bool, err error) {
	if ev.PriorMessageID != "" && ev.PriorMessageID != ev.MessageID {
		// A message recorded under the key an earlier version gave it moves to this one, with
		// its history, unless this key has a row already (then it moved before).
		if _, err := tx.Exec(ctx, qAdoptPriorMessage, ev.Provider, ev.PriorMessageID, ev.MessageID); err != nil {
			return domain.ApplyResult{}, nil, false, fmt.Errorf("move the message from its prior key: %w", err)
		}
	}
	cur, err := lockMessage(ctx, tx, ev.Provider, ev.MessageID, ev.Recipient)
	if err != nil {
		return domain.ApplyResult{}, nil, false, err
	}

	next, res, changed, err := rules.Apply(cur, ev, time.Now())
	if err != nil {
		return domain.ApplyResult{}, nil, false, err
	}

	// Whether or not the status moved: a hard bounce that is stale for its message still says
	// the address is bad. The message_events insert below gates this per event: a second
	// attempt of the same event loses that race and its transaction, this upsert included,
	// rolls back.
	if address, reason, scope, ok := rules.Suppresses(ev, next.Recipient); ok {
		seenAt := ev.OccurredAt
		if seenAt.IsZero() {
			seenAt = time.Now()
		}
		if err := tx.QueryRow(ctx, qUpsertSuppression, address, reason, ev.Provider, ev.EventID,
			ev.MessageID, seenAt, storedScope(scope)).Scan(&res.Suppressed); err != nil {
			return domain.ApplyResult{}, nil, false, fmt.Errorf("suppress %s in %s: %w", redact.Address(address), scope, err)
		}
	}

	// A soft bounce suppresses nothing on its own; enough of them for one address do
	// (config suppression.soft_bounce). Gated per event by the insert below, as the upsert is.
	softSuppressed, err := s.softBounceWithin(ctx, tx, ev, next.Recipient, rules)
	if err != nil {
		return domain.ApplyResult{}, nil, false, err
	}
	res.Suppressed = res.Suppressed || softSuppressed

	// The message's new state (when it changed), its history row and the notifications of the
	// outcome in one statement: the history row's insert is the per-event gate, so the others
	// only land with it (the update runs either way, and errLostRace rolls it back).
	actor, note := correctionBy(ev)
	bounce := rules.KeptBounce(ev)
	args := []any{ev.Provider, ev.EventID, ev.MessageID, ev.Type,
		string(ev.Status), nullTime(ev.OccurredAt), string(res.Outcome), string(res.From),
		string(res.To), res.BounceType, res.Recipient, res.Version, actor, note, res.Suppressed,
		bounce.SMTPCode, bounce.EnhancedCode, bounce.Diagnostic, bounce.Category}
	if changed {
		args = append(args, string(next.Status), next.BounceType, next.Recipient,
			next.OrderRank, next.OrderOccurredAt, next.OrderEventID, next.Version,
			next.Unsubscribed, next.UnsubscribedAt,
			next.Opens, next.Clicks, next.FirstOpenedAt, next.FirstClickedAt, next.CorrectedAt,
			next.Bounce.SMTPCode, next.Bounce.EnhancedCode, next.Bounce.Diagnostic, next.Bounce.Category)
	}
	var ns []delivery.Notification
	notifies := rules.Notifies(ev, res, true)
	if w.prepare != nil && notifies {
		ns = w.prepare(ev, res, true)
	}
	marked = w.markQuiet && !notifies
	written, recorded, err := notifyWithin(ctx, tx, recordOutcomeSQL(changed, len(ns) > 0, marked), args, ev, ns)
	if err != nil {
		return domain.ApplyResult{}, nil, false, fmt.Errorf("record outcome: %w", err)
	}
	if !recorded {
		// Another attempt of this event committed while this one waited for the message lock.
		// Its outcome is the one that counts; this transaction's changes must not land.
		return domain.ApplyResult{}, nil, false, errLostRace
	}
	return res, written, marked, nil
}

// within says what applyWithin's outcome statement writes besides the outcome: the
// notifications prepare renders for it (as EnsureNotification writes them, returned as it
// returns them: see notifyWithin), or, with markQuiet, the event's processed_at when its outcome
// is notified to no one (Process's transaction, which would otherwise mark it next).
type within struct {
	prepare   Prepare
	markQuiet bool
}

// lockMessage creates the message unless it exists (named for recipient, as the first event to
// name one leaves it) and reads its state, locked for tx.
func lockMessage(ctx context.Context, tx pgx.Tx, provider, messageID, recipient string) (domain.MessageState, error) {
	var cur domain.MessageState
	scan := func(row pgx.Row) error {
		return row.Scan(
			&cur.Status, &cur.BounceType, &cur.Recipient, &cur.OrderRank, &cur.OrderOccurredAt,
			&cur.OrderEventID, &cur.Version, &cur.Unsubscribed, &cur.UnsubscribedAt, &cur.Opens,
			&cur.Clicks, &cur.FirstOpenedAt, &cur.FirstClickedAt, &cur.CorrectedAt,
			&cur.Bounce.SMTPCode, &cur.Bounce.EnhancedCode, &cur.Bounce.Diagnostic, &cur.Bounce.Category)
	}
	err := scan(tx.QueryRow(ctx, qEnsureLockMessage, provider, messageID, recipient))
	if errors.Is(err, pgx.ErrNoRows) {
		// Inserted by a concurrent transaction after this statement's snapshot: now committed
		// (the insert waited for it), so a statement of its own reads and locks it.
		err = scan(tx.QueryRow(ctx, qLockMessage, provider, messageID))
	}
	if err != nil {
		return domain.MessageState{}, fmt.Errorf("lock message: %w", err)
	}
	return cur, nil
}

// recordedOutcome returns the outcome stored for ev, with ok false when none is.
func (s *Events) recordedOutcome(ctx context.Context, ev domain.Event) (res domain.ApplyResult, ok bool, err error) {
	return recordedOutcome(ctx, s.pool, ev.Provider, ev.EventID)
}

// querier is a transaction or the pool.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func recordedOutcome(ctx context.Context, q querier, provider, eventID string) (res domain.ApplyResult, ok bool, err error) {
	err = q.QueryRow(ctx, qRecordedOutcome, provider, eventID).Scan(
		&res.Outcome, &res.From, &res.To, &res.BounceType, &res.Recipient, &res.Version, &res.Suppressed)
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.ApplyResult{}, false, nil
	}
	if err != nil {
		return domain.ApplyResult{}, false, fmt.Errorf("read recorded outcome: %w", err)
	}
	return res, true, nil
}

// correctionBy returns who made a correction and why, from its Raw JSON; empty for every other
// event. A Raw that does not decode leaves them empty: the correction still applies.
func correctionBy(ev domain.Event) (actor, note string) {
	if ev.Kind != domain.KindCorrection {
		return "", ""
	}
	var c domain.Correction
	if err := json.Unmarshal(ev.Raw, &c); err != nil {
		return "", ""
	}
	return c.Actor, c.Reason
}
