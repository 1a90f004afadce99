package acceptance_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/acceptance"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/start"
	"github.com/mailhook/mailhook/internal/store"
)

// downStore fails every insert as PostgreSQL does when it cannot take one (err).
type downStore struct{ err error }

func (s downStore) EnqueueRows(context.Context, []store.InboxRow, time.Duration) ([]bool, error) {
	return nil, s.err
}

// temporalStarts stands in for Temporal's side of a start: a workflow ID starts once.
type temporalStarts struct {
	mu      sync.Mutex
	started map[string]domain.Event
	fail    error
}

func (s *temporalStarts) StartAccepted(_ context.Context, ev domain.Event) (start.Status, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return "", s.fail
	}
	if _, ok := s.started[ev.Key()]; ok {
		return start.AlreadyStarted, nil
	}
	s.started[ev.Key()] = ev
	return start.Started, nil
}

// While PostgreSQL is unavailable, a request's events are accepted by starting their workflows
// with the events in the input; a re-send is a duplicate from the start itself, an event the
// store could never keep is still rejected, and a failure of the starts fails the request.
func TestAcceptThroughTemporalWhilePostgresIsDown(t *testing.T) {
	starts := &temporalStarts{started: map[string]domain.Event{}}
	a := acceptance.NewAcceptor(downStore{err: fmt.Errorf("enqueue 2 events: %w", &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"})}, nil)
	a.Through = starts
	bad := ev("evt_bad")
	bad.MessageID = "msg\x00"
	verdicts, err := a.Accept(t.Context(), []domain.Event{ev("evt_1"), bad, ev("evt_2")})
	require.NoError(t, err)
	assert.Equal(t, []acceptance.Status{acceptance.Accepted, acceptance.Rejected, acceptance.Accepted},
		[]acceptance.Status{verdicts[0].Status, verdicts[1].Status, verdicts[2].Status})
	assert.Len(t, starts.started, 2)
	assert.Equal(t, "msg_evt_1", starts.started["postscale:evt_1"].MessageID, "the start carries the event itself")

	verdicts, err = a.Accept(t.Context(), []domain.Event{ev("evt_2"), ev("evt_3")})
	require.NoError(t, err)
	assert.Equal(t, acceptance.Duplicate, verdicts[0].Status, "a re-send during the outage")
	assert.Equal(t, acceptance.Accepted, verdicts[1].Status)

	starts.fail = fmt.Errorf("%w: start workflow: deadline exceeded", start.ErrUnavailable)
	_, err = a.Accept(t.Context(), []domain.Event{ev("evt_4")})
	require.Error(t, err, "both stores down: 503")
	assert.ErrorIs(t, err, start.ErrUnavailable)
	starts.fail = fmt.Errorf("%w: 3000000 bytes", start.ErrTooLarge)
	_, err = a.Accept(t.Context(), []domain.Event{ev("evt_5")})
	assert.ErrorIs(t, err, start.ErrTooLarge, "too large for a workflow input: 503 during the outage")
}

// Only unavailability goes through Temporal: an insert that fails for another reason (a missing
// table, the acceptor stopping) is answered 503 and starts nothing, and without Through every
// failure is.
func TestAcceptThroughTemporalOnlyWhenPostgresIsUnavailable(t *testing.T) {
	starts := &temporalStarts{started: map[string]domain.Event{}}
	a := acceptance.NewAcceptor(downStore{err: &pgconn.PgError{Code: "42P01", Message: "relation does not exist"}}, nil)
	a.Through = starts
	_, err := a.Accept(t.Context(), []domain.Event{ev("evt_1")})
	require.Error(t, err)
	assert.Empty(t, starts.started)

	a = acceptance.NewAcceptor(downStore{err: errors.New("dial tcp: connect: connection refused")}, nil)
	_, err = a.Accept(t.Context(), []domain.Event{ev("evt_1")})
	require.Error(t, err, "no Through: 503 as before")
}
