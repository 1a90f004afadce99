package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/erasure"
	"github.com/mailhook/mailhook/internal/mailaddr"
	"github.com/mailhook/mailhook/internal/redact"
)

// storedScope is the suppressions.scope value of an API scope: empty for global.
func storedScope(scope string) string {
	if scope == domain.GlobalScope {
		return ""
	}
	return scope
}

// apiScope is the API name of a stored scope.
func apiScope(stored string) string {
	if stored == "" {
		return domain.GlobalScope
	}
	return stored
}

// AddressSuppressions returns every scope's suppression of an address (normalized first), the
// global one first, then by scope name; an erased address's rows are found by its hash, and
// show the hash (the address's own row first when it has both in a scope: suppressed again
// after the erasure). The error wraps domain.ErrNotFound when the address is not suppressed in any
// scope.
func (s *Suppressions) AddressSuppressions(ctx context.Context, address string) ([]Suppression, error) {
	keys := s.keysOf(address)
	address = keys.key
	rows, err := s.pool.Query(ctx, qAddressSuppressions, keys.all, keys.current, address)
	if err == nil {
		var sups []Suppression
		sups, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Suppression, error) {
			return scanSuppression(row)
		})
		if err == nil && len(sups) == 0 {
			err = domain.ErrNotFound
		}
		if err == nil {
			return sups, nil
		}
	}
	return nil, fmt.Errorf("get suppressions of %s: %w", redact.Address(address), err)
}

// SuppressionCheck answers whether mail of one scope may be sent to an address.
type SuppressionCheck struct {
	Address string `json:"address"`
	Scope   string `json:"scope"`
	// Suppressed: the address has a global row or a row of Scope.
	Suppressed bool `json:"suppressed"`
	// Reasons are the matching rows' reasons, the global row's first, each once; empty when
	// not suppressed.
	Reasons []string `json:"reasons"`
}

// CheckSuppression says whether the address (normalized first) is suppressed for mail of scope
// (domain.GlobalScope or a scope name): it is when it, or its hash once erased, has a
// global row or a row of that scope. It is the check a sender makes before every send, so it is
// one indexed read and nothing else.
func (s *Suppressions) CheckSuppression(ctx context.Context, address, scope string) (SuppressionCheck, error) {
	keys := s.keysOf(address)
	address = keys.key
	if scope == "" {
		scope = domain.GlobalScope
	}
	if address == "" || !domain.ValidScope(scope) {
		return SuppressionCheck{}, fmt.Errorf("check suppression: address %q, scope %q: %w",
			redact.Address(address), scope, ErrInvalidSuppressionQuery)
	}
	out := SuppressionCheck{Address: address, Scope: scope, Reasons: []string{}}
	rows, err := s.pool.Query(ctx, qCheckSuppression, keys.all, storedScope(scope), keys.current)
	if err != nil {
		return SuppressionCheck{}, fmt.Errorf("check suppression %s in %s: %w", redact.Address(address), scope, err)
	}
	var storedSc, reason string
	_, err = pgx.ForEachRow(rows, []any{&storedSc, &reason}, func() error {
		out.Suppressed = true
		if !slices.Contains(out.Reasons, reason) {
			out.Reasons = append(out.Reasons, reason)
		}
		return nil
	})
	if err != nil {
		return SuppressionCheck{}, fmt.Errorf("check suppression %s in %s: %w", redact.Address(address), scope, err)
	}
	return out, nil
}

// ErrInvalidSuppressionQuery is returned (wrapped) for an empty address or a malformed scope.
var ErrInvalidSuppressionQuery = errors.New("invalid address or scope")

// ListSuppressions returns the suppressions of up to f.Limit addresses after f.After, in address
// then scope order, optionally of one reason or one scope only. An address's rows are never
// split between pages, so a page may hold more rows than f.Limit.
func (s *Suppressions) ListSuppressions(ctx context.Context, f SuppressionFilter) ([]Suppression, error) {
	if f.Limit < 1 {
		return nil, errors.New("list suppressions: limit must be at least 1")
	}
	if f.Scope != "" && !domain.ValidScope(f.Scope) {
		return nil, fmt.Errorf("list suppressions: scope %q: %w", f.Scope, ErrInvalidSuppressionQuery)
	}
	sql, args := listSuppressionsSQL(f)
	rows, err := s.pool.Query(ctx, sql, args...)
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

// listSuppressionsSQL is qListSuppressions with the filters f asks for, and its arguments.
func listSuppressionsSQL(f SuppressionFilter) (string, []any) {
	args := []any{mailaddr.Key(f.After), f.Limit}
	var filter strings.Builder
	if f.Reason != "" {
		args = append(args, f.Reason)
		fmt.Fprintf(&filter, " AND reason = $%d", len(args))
	}
	if f.Scope != "" {
		args = append(args, storedScope(f.Scope))
		fmt.Fprintf(&filter, " AND scope = $%d", len(args))
	}
	return fmt.Sprintf(qListSuppressions, filter.String()), args
}

// LiftSuppression removes an address's suppression in one scope (domain.GlobalScope or a
// scope name; "" means global) and writes the audit row (the suppression as it was, who lifted
// it and why) in the same transaction; an erased address's row, kept under its hash, is lifted
// too (its audit row holds the hash), so the address is no longer suppressed in that scope
// whichever rows it had. The address's other scopes keep theirs. The error wraps domain.ErrNotFound
// when the address is not suppressed in that scope; then nothing is written.
func (s *Suppressions) LiftSuppression(ctx context.Context, address, scope, liftedBy, liftReason string) (SuppressionLift, error) {
	keys := s.keysOf(address)
	address = keys.key
	if scope == "" {
		scope = domain.GlobalScope
	}
	var lift SuppressionLift
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, qDeleteSuppression, keys.all, storedScope(scope), keys.current)
		if err != nil {
			return err
		}
		sups, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Suppression, error) {
			return scanSuppression(row)
		})
		if err != nil {
			return err
		}
		if len(sups) == 0 {
			return domain.ErrNotFound
		}
		// The address's own row first, then its erased one: the answer is the first's lift.
		slices.SortStableFunc(sups, func(a, b Suppression) int {
			return cmp.Compare(boolRank(erasure.IsHash(a.Address)), boolRank(erasure.IsHash(b.Address)))
		})
		for i, sup := range sups {
			l := SuppressionLift{
				Address: sup.Address, Scope: sup.Scope, Reason: sup.Reason, Provider: sup.Provider, EventID: sup.EventID,
				MessageID: sup.MessageID, FirstSeen: sup.FirstSeen, LastSeen: sup.LastSeen,
				TimesSeen: sup.TimesSeen, LiftedBy: liftedBy, LiftReason: liftReason,
			}
			if err := tx.QueryRow(ctx, qInsertSuppressionLift, sup.Address, storedScope(sup.Scope), sup.Reason, sup.Provider,
				sup.EventID, sup.MessageID, sup.FirstSeen, sup.LastSeen, sup.TimesSeen, liftedBy, liftReason,
			).Scan(&l.ID, &l.LiftedAt); err != nil {
				return err
			}
			if i == 0 {
				lift = l
			}
		}
		return nil
	})
	if err != nil {
		return SuppressionLift{}, fmt.Errorf("lift suppression %s in %s: %w", redact.Address(address), scope, err)
	}
	return lift, nil
}

// addressKeys are the keys an address's suppressions may be under.
type addressKeys struct {
	key     string   // mailaddr.Key: the key this version gives it
	current []string // key and its erased key: rows found whatever wrote them
	all     []string // current and the keys an older version gave it: rows found when folded
}

// keysOf is the keys of address (as the caller wrote it): its key and, once erased, its hash;
// and for rows a version before migration 21 wrote (folded), the key that version gave it as
// migration 21 re-keyed it, and its hash in both forms, since an erased row of those versions
// stays under the hash of that version's key. A folded row found so is of an address that
// version could not tell from this one (mailaddr.LegacyKey): it suppressed it then, and still does.
func (s *Suppressions) keysOf(address string) addressKeys {
	k := mailaddr.Key(address)
	current := []string{k, s.erasedKey(k)}
	all := slices.Clone(current)
	for _, legacy := range mailaddr.LegacyKeys(address) {
		if legacy == k {
			continue // an address of ASCII letters, lower-cased: its keys are current's
		}
		for _, c := range []string{mailaddr.Key(legacy), s.erasedKey(mailaddr.Key(legacy)), s.erasedKey(legacy)} {
			if !slices.Contains(all, c) {
				all = append(all, c)
			}
		}
	}
	return addressKeys{key: k, current: current, all: all}
}

// erasedKey is the suppressions key an erased address was left under (Erase): its hash, or the
// address itself when erasure is not configured, so that a query for both asks for one.
func (s *Suppressions) erasedKey(address string) string {
	if h, err := s.hasher.Hash(address); err == nil {
		return h
	}
	return address
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

func scanSuppression(row pgx.Row) (Suppression, error) {
	var sup Suppression
	err := row.Scan(&sup.Address, &sup.Scope, &sup.Reason, &sup.Provider, &sup.EventID, &sup.MessageID,
		&sup.FirstSeen, &sup.LastSeen, &sup.TimesSeen)
	if errors.Is(err, pgx.ErrNoRows) {
		return Suppression{}, domain.ErrNotFound
	}
	if err != nil {
		return Suppression{}, err
	}
	sup.Scope = apiScope(sup.Scope)
	return sup, nil
}
