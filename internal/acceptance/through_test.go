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

// timingOutStarts is a slow Temporal: the first `slow` asks for each event run out of time
// (context.DeadlineExceeded, as start.Starter's timeout reports them), and those in `creates`
// create the run before they do, as a slow server most often has.
type timingOutStarts struct {
	temporalStarts
	slow    int
	creates bool
	asks    map[string]int
}

func (s *timingOutStarts) StartAccepted(ctx context.Context, ev domain.Event) (start.Status, error) {
	s.mu.Lock()
	s.asks[ev.Key()]++
	n := s.asks[ev.Key()]
	s.mu.Unlock()
	if n <= s.slow {
		if s.creates {
			_, _ = s.temporalStarts.StartAccepted(ctx, ev)
		}
		return "", fmt.Errorf("%w: start workflow %s: %w", start.ErrUnavailable, ev.Key(), context.DeadlineExceeded)
	}
	return s.temporalStarts.StartAccepted(ctx, ev)
}

// A start through Temporal that ran out of time is asked once more while the client waits: a
// run the first ask created answers "already started", and the request is a 200 (accepted)
// instead of a 503 and a re-send. Slow twice is still a 503, a start that failed otherwise is
// not asked again, and a request whose client is gone does not ask again.
func TestAStartThroughTemporalThatRanOutOfTimeIsAskedOnceMore(t *testing.T) {
	down := downStore{err: &pgconn.PgError{Code: "57P01", Message: "terminating connection"}}
	newAcceptor := func(starts *timingOutStarts) *acceptance.Acceptor {
		starts.started, starts.asks = map[string]domain.Event{}, map[string]int{}
		a := acceptance.NewAcceptor(down, nil)
		a.Through = starts
		return a
	}

	for _, creates := range []bool{true, false} {
		starts := &timingOutStarts{slow: 1, creates: creates}
		verdicts, err := newAcceptor(starts).Accept(t.Context(), []domain.Event{ev("evt_1"), ev("evt_2")})
		require.NoError(t, err, "created by the first ask: %v", creates)
		assert.Equal(t, []acceptance.Status{acceptance.Accepted, acceptance.Accepted}, []acceptance.Status{verdicts[0].Status, verdicts[1].Status})
		assert.Equal(t, map[string]int{"postscale:evt_1": 2, "postscale:evt_2": 2}, starts.asks, "two asks per event, no more")
		assert.Len(t, starts.started, 2, "each event held by one run")
	}

	starts := &timingOutStarts{slow: 2, creates: true}
	_, err := newAcceptor(starts).Accept(t.Context(), []domain.Event{ev("evt_1")})
	require.Error(t, err, "slow twice: 503")
	assert.True(t, start.IsUncertain(err), "the answer says the start ran out of time: %v", err)
	assert.Equal(t, 2, starts.asks["postscale:evt_1"])

	refusing := &timingOutStarts{}
	a := newAcceptor(refusing)
	refusing.fail = fmt.Errorf("%w: connection refused", start.ErrUnavailable)
	_, err = a.Accept(t.Context(), []domain.Event{ev("evt_1")})
	require.Error(t, err, "Temporal unreachable: 503")
	assert.Equal(t, 1, refusing.asks["postscale:evt_1"], "a failure that is not a timeout is not asked again")

	gone := &goneAfterFirstAsk{timingOutStarts: timingOutStarts{slow: 1, creates: true}}
	ctx, cancel := context.WithCancel(t.Context())
	gone.cancel = cancel
	a = newAcceptor(&gone.timingOutStarts)
	a.Through = gone
	_, err = a.Accept(ctx, []domain.Event{ev("evt_1")})
	require.Error(t, err, "the client left: 503, which nobody reads")
	assert.Equal(t, 1, gone.asks["postscale:evt_1"], "no second ask for a client that left")
}

// goneAfterFirstAsk is a slow Temporal whose caller's client leaves during the first ask.
type goneAfterFirstAsk struct {
	timingOutStarts
	cancel context.CancelFunc
}

func (s *goneAfterFirstAsk) StartAccepted(ctx context.Context, ev domain.Event) (start.Status, error) {
	defer s.cancel()
	return s.timingOutStarts.StartAccepted(ctx, ev)
}
