package acceptance_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/acceptance"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
	"github.com/mailhook/mailhook/internal/testenv"
)

func ev(id string) domain.Event {
	return domain.Event{Provider: "postscale", EventID: id, Type: "email.delivered", Kind: domain.KindStatus,
		Status: domain.StatusDelivered, MessageID: "msg_" + id}
}

// Concurrent requests share INSERTs, and each still gets its own answer: every event accepted
// exactly once across all of them, a shared event exactly once, and one row per event.
func TestConcurrentAcceptsShareInsertsAndAnswerEachRequest(t *testing.T) {
	s := storetest.Open(t)
	a := acceptance.NewAcceptor(s.Inbox, nil)
	a.Writers = 2
	// This is about sharing, not about the timeout: 200 requests queued for two writers on a
	// starved machine and a shared PostgreSQL may wait past the default 5 s, which is a 503.
	a.Timeout = time.Minute
	runAcceptor(t, a)

	const n = 200
	answers := make([][]acceptance.Verdict, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			st, err := a.Accept(t.Context(), []domain.Event{ev(fmt.Sprintf("evt_%03d", i)), ev("evt_shared"), ev(fmt.Sprintf("evt_%03d", i))})
			// Not require: FailNow on a goroutine other than the test's is no stop.
			if assert.NoError(t, err, "request %d", i) {
				answers[i] = st
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	shared := 0
	for i, st := range answers {
		require.Len(t, st, 3)
		assert.Equal(t, acceptance.Accepted, st[0].Status, "request %d: its own event", i)
		assert.Equal(t, acceptance.Duplicate, st[2].Status, "request %d: its own event repeated", i)
		if st[1].Status == acceptance.Accepted {
			shared++
		}
	}
	assert.Equal(t, 1, shared, "the shared event is accepted by exactly one request")
	stats := a.Stats()
	assert.EqualValues(t, n, stats.Requests)
	assert.Less(t, stats.Inserts, stats.Requests, "concurrent requests never shared an INSERT")
	t.Logf("%d requests in %d inserts", stats.Requests, stats.Inserts)
	var rows int
	require.NoError(t, storetest.Pool(t, s).QueryRow(t.Context(), `SELECT count(*) FROM webhook_events WHERE awaiting_start`).Scan(&rows))
	assert.Equal(t, n+1, rows)
}

// An event that cannot be stored is rejected with a reason, alone: the rest of its request is
// accepted (a provider re-sends a batch whole, so failing the batch would fail the good events).
func TestUnstorableEventIsRejectedAlone(t *testing.T) {
	s := storetest.Open(t)
	a := acceptance.NewAcceptor(s.Inbox, nil)
	runAcceptor(t, a)
	bad := ev("evt_bad")
	bad.Raw = []byte(`{"n":1e1000000}`)
	long := ev(strings.Repeat("e", 1100))
	got, err := a.Accept(t.Context(), []domain.Event{ev("evt_ok"), bad, long, ev("evt_ok_too")})
	require.NoError(t, err)
	require.Len(t, got, 4)
	assert.Equal(t, acceptance.Accepted, got[0].Status)
	assert.Equal(t, acceptance.Rejected, got[1].Status)
	assert.Contains(t, got[1].Err.Error(), "larger than PostgreSQL's numeric holds")
	assert.Equal(t, acceptance.Rejected, got[2].Status)
	assert.Contains(t, got[2].Err.Error(), "event id is 1100 bytes")
	assert.Equal(t, acceptance.Accepted, got[3].Status)
	assert.Equal(t, 2, rows(t, s, `SELECT count(*) FROM webhook_events`))
}

// When PostgreSQL refuses one event of a shared INSERT (something Storable did not foresee; here
// a CHECK constraint the test adds stands for it), only that event is rejected: every other
// request of the same statement, and every other event of the same request, is accepted. Before
// this, a signed event with 1e1000000 made about half of the valid requests sent alongside it
// fail with 503.
func TestRefusedRowInASharedInsertFailsOnlyItself(t *testing.T) {
	s := storetest.Open(t)
	_, err := storetest.Pool(t, s).Exec(t.Context(), `ALTER TABLE webhook_events ADD CONSTRAINT poison CHECK (event_id NOT LIKE 'poison%')`)
	require.NoError(t, err)
	a := acceptance.NewAcceptor(s.Inbox, nil)
	a.Writers = 2
	// This is about the refused row, not the timeout: the one-at-a-time inserts after the
	// refusal, for 300 requests on a starved machine, passed the default 5 s (a 503, "context
	// deadline exceeded", at load 20), which is not one request failing because of another.
	a.Timeout = time.Minute
	runAcceptor(t, a)

	const n = 300
	answers := make([][]acceptance.Verdict, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			evs := []domain.Event{ev(fmt.Sprintf("evt_%03d", i))}
			if i%10 == 0 {
				evs = append(evs, ev(fmt.Sprintf("poison_%03d", i)), ev(fmt.Sprintf("evt_%03d_b", i)))
			}
			answers[i], errs[i] = a.Accept(t.Context(), evs)
		})
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i], "request %d failed because of another", i)
		assert.Equal(t, acceptance.Accepted, answers[i][0].Status, "request %d", i)
		if i%10 == 0 {
			assert.Equal(t, acceptance.Rejected, answers[i][1].Status, "request %d: the poison", i)
			assert.Contains(t, answers[i][1].Err.Error(), "poison")
			assert.Equal(t, acceptance.Accepted, answers[i][2].Status, "request %d: the event after the poison", i)
		}
	}
	assert.Equal(t, n+n/10, rows(t, s, `SELECT count(*) FROM webhook_events`))
	assert.Less(t, a.Stats().Inserts, int64(3*n), "the fallback ran for every request, not only the refused ones")
}

// Without Run (or after it stopped) each request inserts on its own.
func TestAcceptWithoutRunInsertsDirectly(t *testing.T) {
	s := storetest.Open(t)
	a := acceptance.NewAcceptor(s.Inbox, nil)
	st, err := a.Accept(t.Context(), []domain.Event{ev("evt_1"), ev("evt_1")})
	require.NoError(t, err)
	assert.Equal(t, []acceptance.Verdict{{Status: acceptance.Accepted}, {Status: acceptance.Duplicate}}, st)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	<-done
	st, err = a.Accept(t.Context(), []domain.Event{ev("evt_2")})
	require.NoError(t, err)
	assert.Equal(t, []acceptance.Verdict{{Status: acceptance.Accepted}}, st)
}

// PostgreSQL that does not answer within the acceptor's Timeout is an error (a 503), never an
// answer: nothing may be called accepted that is not committed.
func TestAcceptTimesOutWhenPostgreSQLHangs(t *testing.T) {
	s := storetest.Open(t)
	a := acceptance.NewAcceptor(s.Inbox, nil)
	a.Timeout = 300 * time.Millisecond
	runAcceptor(t, a)
	tx, err := storetest.Pool(t, s).Begin(t.Context())
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	_, err = tx.Exec(t.Context(), `LOCK TABLE webhook_events IN EXCLUSIVE MODE`)
	require.NoError(t, err)
	_, err = a.Accept(t.Context(), []domain.Event{ev("evt_locked")})
	require.Error(t, err)
	require.NoError(t, tx.Rollback(t.Context()))
}

// runAcceptor runs a's writers for the test, and returns once they take requests, so that the
// test's requests go through them (and share inserts). A fixed pause was not always enough on a
// starved machine: the requests then inserted one by one, as without Run.
func runAcceptor(t *testing.T, a *acceptance.Acceptor) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	testenv.WaitUntil(t, "the acceptor's writers taking requests", testenv.Stall, a.Writing)
}

func rows(t *testing.T, s *store.Store, query string) int {
	t.Helper()
	var n int
	require.NoError(t, storetest.Pool(t, s).QueryRow(t.Context(), query).Scan(&n))
	return n
}

// gatedInbox is a store whose inserts end when told: block returns at once when nil, else
// waits for it (a writer's insert that runs as long as the test says); every insert's keys are
// recorded and reported on started.
type gatedInbox struct {
	mu      sync.Mutex
	keys    []string
	started chan string
	block   func(ctx context.Context, n int)
}

func (g *gatedInbox) EnqueueRows(ctx context.Context, rows []store.InboxRow, _ time.Duration) ([]bool, error) {
	g.mu.Lock()
	n := len(g.keys)
	for _, r := range rows {
		_, id := r.Key()
		g.keys = append(g.keys, id)
	}
	g.mu.Unlock()
	_, id := rows[0].Key()
	g.started <- id
	if g.block != nil {
		g.block(ctx, n)
	}
	out := make([]bool, len(rows))
	for i := range out {
		out[i] = true
	}
	return out, nil
}

// An insert a writer has begun is answered from its outcome even when it ends after the
// request's own wait did: its rows are committed, so its answer is 200, never 503 (on a
// starved machine a request used to give up while the insert it had handed over committed).
func TestAnInsertUnderWayIsAnsweredFromItsOutcome(t *testing.T) {
	g := &gatedInbox{started: make(chan string, 8)}
	// The insert commits when the writer's own timeout passes: the request's, which began
	// before the writer took it, has passed by then.
	g.block = func(ctx context.Context, _ int) { <-ctx.Done() }
	a := acceptance.NewAcceptor(g, nil)
	a.Writers, a.Timeout = 1, 200*time.Millisecond
	runAcceptor(t, a)
	got, err := a.Accept(t.Context(), []domain.Event{ev("evt_slow")})
	require.NoError(t, err, "a committed insert answered as a failure")
	assert.Equal(t, acceptance.Accepted, got[0].Status)
}

// A request no writer took within the timeout is answered 503 and is then never inserted: the
// 503 is true, and its retry is accepted, not a duplicate of a row written behind its back.
func TestARequestNoWriterTookIsNeverInserted(t *testing.T) {
	release := make(chan struct{})
	g := &gatedInbox{started: make(chan string, 8)}
	g.block = func(_ context.Context, n int) {
		if n == 0 {
			<-release
		}
	}
	a := acceptance.NewAcceptor(g, nil)
	a.Writers, a.Timeout = 1, 100*time.Millisecond
	runAcceptor(t, a)
	first := make(chan error, 1)
	go func() { _, err := a.Accept(t.Context(), []domain.Event{ev("evt_first")}); first <- err }()
	require.Equal(t, "evt_first", <-g.started)
	_, err := a.Accept(t.Context(), []domain.Event{ev("evt_waited")})
	require.Error(t, err, "the only writer was busy for longer than the timeout")
	close(release)
	require.NoError(t, <-first)
	got, err := a.Accept(t.Context(), []domain.Event{ev("evt_waited")})
	require.NoError(t, err)
	assert.Equal(t, acceptance.Accepted, got[0].Status, "the retry of a request answered 503")
	g.mu.Lock()
	defer g.mu.Unlock()
	assert.Equal(t, []string{"evt_first", "evt_waited"}, g.keys, "the abandoned request was inserted after its 503")
}
