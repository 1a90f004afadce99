package store_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/precedence"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

// TestApplyStatusOrderIndependent applies every arrival order of one message's status events,
// each to a fresh message, and checks that the stored end state is the same for all of them
// and is precedence's fold. Ties are included on purpose: failed/bounced share a rank and a
// timestamp, and deferred/delivered share a timestamp.
func TestApplyStatusOrderIndependent(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)

	evs := []domain.Event{
		statusEvent("e1", "", domain.StatusAccepted, "", at(1)),
		statusEvent("e2", "", domain.StatusDeferred, "", at(2)),
		statusEvent("e3", "", domain.StatusDelivered, "", at(2)),
		statusEvent("e4", "", domain.StatusFailed, "", at(3)),
		statusEvent("e5", "", domain.StatusBounced, domain.BounceHard, at(3)),
		statusEvent("e6", "", domain.StatusDelivered, "", at(4)),
	}
	var want precedence.State
	for _, ev := range evs {
		want = precedence.Apply(want, ev).Next
	}
	require.Equal(t, domain.StatusBounced, want.Status, "the fixture should end in the tie-broken bounce")

	perms := permutations(len(evs))
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range jobs {
				checkPermutation(t, s, evs, perms[i], i, want)
			}
		})
	}
	for i := range perms {
		if t.Failed() {
			break
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
}

func checkPermutation(t *testing.T, s *store.Store, evs []domain.Event, perm []int, n int, want precedence.State) {
	ctx := t.Context()
	// Event ids share a per-permutation prefix so they stay unique in the database while
	// comparing among themselves exactly as the unprefixed ids do.
	prefix := fmt.Sprintf("p%04d-", n)
	msg := fmt.Sprintf("msg_%04d", n)

	var (
		fold  precedence.State
		first = map[string]domain.ApplyResult{}
	)
	apply := func(ev domain.Event) {
		ev.EventID = prefix + ev.EventID
		ev.MessageID = msg
		got, err := s.Events.ApplyStatus(ctx, ev, rules)
		if !assert.NoError(t, err, "permutation %v", perm) {
			return
		}
		if prev, ok := first[ev.EventID]; ok {
			assert.Equal(t, prev, got, "re-applied %s in permutation %v", ev.EventID, perm)
			return
		}
		first[ev.EventID] = got

		r := precedence.Apply(fold, ev)
		fold = r.Next
		wantOutcome := domain.OutcomeStale
		switch {
		case r.Moved:
			wantOutcome = domain.OutcomeMoved
		case r.Advanced:
			wantOutcome = domain.OutcomeAdvanced
		}
		assert.Equal(t, wantOutcome, got.Outcome, "%s in permutation %v", ev.EventID, perm)
		assert.Equal(t, fold.Version, got.Version, "%s in permutation %v", ev.EventID, perm)
	}
	for _, i := range perm {
		apply(evs[i])
	}
	// A retry after the message moved on, of a different event each permutation.
	apply(evs[perm[n%len(perm)]])

	var (
		status, bounce, orderID string
		rank                    int
		orderAt                 *time.Time
		version                 int64
	)
	err := s.Pool().QueryRow(ctx, `
		SELECT status, bounce_type, order_rank, order_occurred_at, order_event_id, version
		FROM messages WHERE provider = $1 AND message_id = $2`, provider, msg,
	).Scan(&status, &bounce, &rank, &orderAt, &orderID, &version)
	if !assert.NoError(t, err) {
		return
	}
	assert.Equal(t, want.Status, domain.Status(status), "permutation %v", perm)
	assert.Equal(t, want.BounceType, bounce, "permutation %v", perm)
	assert.Equal(t, want.Key.Rank, rank, "permutation %v", perm)
	if assert.NotNil(t, orderAt, "permutation %v", perm) {
		assert.True(t, want.Key.OccurredAt.Equal(*orderAt), "permutation %v: order time %v", perm, *orderAt)
	}
	assert.Equal(t, want.Key.EventID, strings.TrimPrefix(orderID, prefix), "permutation %v", perm)
	// The version counts the visible changes along this arrival order, so it is the only
	// field that may differ between permutations.
	assert.Equal(t, fold.Version, version, "permutation %v", perm)
}

// permutations returns every ordering of 0..n-1.
func permutations(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for pos := 0; pos <= len(p); pos++ {
			q := make([]int, 0, n)
			q = append(q, p[:pos]...)
			q = append(q, n-1)
			q = append(q, p[pos:]...)
			out = append(out, q)
		}
	}
	return out
}
