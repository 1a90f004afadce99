package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/mailhook/mailhook/internal/event"
	"github.com/mailhook/mailhook/internal/redact"
)

// SuppressionOf says whether ev suppresses its recipient and why: a hard bounce, a complaint or
// an unsubscribe. The address is the event's recipient, or else recipient (the message's,
// after the event), trimmed and lower-cased; an event with neither suppresses nothing.
// Corrections never suppress: they are an operator's word about one message, not a signal
// from the recipient's mailbox.
func SuppressionOf(ev event.Event, recipient string) (address, reason string, ok bool) {
	switch {
	case ev.Kind == event.KindStatus && ev.Status == event.StatusBounced && ev.BounceType == event.BounceHard:
		reason = ReasonHardBounce
	case ev.Kind == event.KindStatus && ev.Status == event.StatusComplained:
		reason = ReasonComplaint
	case ev.Kind == event.KindUnsubscribed:
		reason = ReasonUnsubscribe
	default:
		return "", "", false
	}
	address = NormalizeAddress(ev.Recipient)
	if address == "" {
		address = NormalizeAddress(recipient)
	}
	if address == "" {
		return "", "", false
	}
	return address, reason, true
}

// NormalizeAddress is the suppressions key of an address: trimmed and lower-cased.
func NormalizeAddress(address string) string {
	return strings.ToLower(strings.TrimSpace(address))
}

// KnownSuppressionReason reports whether r is one of SuppressionReasons.
func KnownSuppressionReason(r string) bool {
	for _, k := range SuppressionReasons {
		if r == k {
			return true
		}
	}
	return false
}

// GetSuppression returns the suppression of an address (normalized first); the error wraps
// ErrNotFound when the address is not suppressed.
func (s *Store) GetSuppression(ctx context.Context, address string) (Suppression, error) {
	address = NormalizeAddress(address)
	sup, err := scanSuppression(s.pool.QueryRow(ctx, qGetSuppression, address))
	if err != nil {
		return Suppression{}, fmt.Errorf("get suppression %s: %w", redact.Address(address), err)
	}
	return sup, nil
}

// ListSuppressions returns up to f.Limit suppressions with an address after f.After, in address
// order, optionally of one reason only.
func (s *Store) ListSuppressions(ctx context.Context, f SuppressionFilter) ([]Suppression, error) {
	if f.Limit < 1 {
		return nil, errors.New("list suppressions: limit must be at least 1")
	}
	rows, err := s.pool.Query(ctx, qListSuppressions, NormalizeAddress(f.After), f.Reason, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("list suppressions: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Suppression, error) {
		return scanSuppression(row)
	})
	if err != nil {
		return nil, fmt.Errorf("list suppressions: %w", err)
	}
	return out, nil
}

// LiftSuppression removes an address from the suppressions and writes the audit row (the
// suppression as it was, who lifted it and why) in the same transaction. The error wraps
// ErrNotFound when the address is not suppressed; then nothing is written.
func (s *Store) LiftSuppression(ctx context.Context, address, liftedBy, liftReason string) (SuppressionLift, error) {
	address = NormalizeAddress(address)
	var lift SuppressionLift
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		sup, err := scanSuppression(tx.QueryRow(ctx, qDeleteSuppression, address))
		if err != nil {
			return err
		}
		lift = SuppressionLift{
			Address: sup.Address, Reason: sup.Reason, Provider: sup.Provider, EventID: sup.EventID,
			MessageID: sup.MessageID, FirstSeen: sup.FirstSeen, LastSeen: sup.LastSeen,
			TimesSeen: sup.TimesSeen, LiftedBy: liftedBy, LiftReason: liftReason,
		}
		return tx.QueryRow(ctx, qInsertSuppressionLift, sup.Address, sup.Reason, sup.Provider,
			sup.EventID, sup.MessageID, sup.FirstSeen, sup.LastSeen, sup.TimesSeen, liftedBy, liftReason,
		).Scan(&lift.ID, &lift.LiftedAt)
	})
	if err != nil {
		return SuppressionLift{}, fmt.Errorf("lift suppression %s: %w", redact.Address(address), err)
	}
	return lift, nil
}

func scanSuppression(row pgx.Row) (Suppression, error) {
	var sup Suppression
	err := row.Scan(&sup.Address, &sup.Reason, &sup.Provider, &sup.EventID, &sup.MessageID,
		&sup.FirstSeen, &sup.LastSeen, &sup.TimesSeen)
	if errors.Is(err, pgx.ErrNoRows) {
		return Suppression{}, ErrNotFound
	}
	if err != nil {
		return Suppression{}, err
	}
	return sup, nil
}
