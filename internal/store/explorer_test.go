package store_test

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/codec"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

// walkEvents pages through ListEvents with f and returns the event ids in the order seen;
// between pages it calls between (nil: nothing).
func walkEvents(t *testing.T, s *store.Store, f store.EventFilter, between func(page int)) []string {
	t.Helper()
	var ids []string
	for page := 0; ; page++ {
		require.Less(t, page, 1000)
		list, next, err := s.Explorer.ListEvents(t.Context(), f)
		require.NoError(t, err)
		for _, e := range list {
			ids = append(ids, e.EventID)
		}
		if next == "" {
			return ids
		}
		f.After = next
		if between != nil {
			between(page)
		}
	}
}

// A walk through the explorer's pages sees every event that existed when it began once, newest
// first, while events keep arriving between pages (in batches, so many share one received_at),
// and sees none of those (they are newer than its first page).
func TestExplorerPagesWithoutGapsOrRepeatsWhileEventsArrive(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := t.Context()
	var want []string
	for batch := range 6 {
		var evs []domain.Event
		for i := range 10 {
			id := fmt.Sprintf("evt_%d_%d", batch, i)
			evs = append(evs, statusEvent(id, "msg_"+id, domain.StatusDelivered, "", at(batch)))
			want = append(want, id)
		}
		_, err := storetest.Enqueue(ctx, s, evs...) // one statement: one received_at for the batch
		require.NoError(t, err)
	}
	arrived := 0
	seen := walkEvents(t, s, store.EventFilter{Limit: 7}, func(int) {
		var evs []domain.Event
		for range 3 {
			arrived++
			evs = append(evs, statusEvent(fmt.Sprintf("new_%d", arrived), "msg_new", domain.StatusDelivered, "", at(9)))
		}
		_, err := storetest.Enqueue(ctx, s, evs...)
		require.NoError(t, err)
	})
	require.Positive(t, arrived)
	assert.Len(t, seen, len(want), "each event once")
	assert.ElementsMatch(t, want, seen)

	// Newest first, in (received_at, provider, event_id) order: the walk again, now that nothing
	// arrives, reads the rows in exactly that order.
	all := walkEvents(t, s, store.EventFilter{Limit: 4}, nil)
	var order []string
	rows, err := s.Pool().Query(ctx, `SELECT event_id FROM webhook_events ORDER BY received_at DESC, provider DESC, event_id DESC`)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		order = append(order, id)
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, order, all)

	_, _, err = s.Explorer.ListEvents(ctx, store.EventFilter{After: "not-a-cursor", Limit: 5})
	assert.ErrorIs(t, err, store.ErrBadCursor)
}

// Each filter keeps what it names, alone and combined: provider, type, outcome, message id,
// recipient (as suppressions key it, whatever the provider's spelling), time, quarantined, and
// accepted through Temporal.
func TestExplorerFilters(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := t.Context()
	process := func(evs ...domain.Event) {
		t.Helper()
		_, err := storetest.Enqueue(ctx, s, evs...)
		require.NoError(t, err)
		for _, ev := range evs {
			_, err := s.Events.Process(ctx, ev.Provider, ev.EventID, false, rules)
			require.NoError(t, err)
		}
	}
	delivered := statusEvent("jane_delivered", "msg_jane", domain.StatusDelivered, "", at(10))
	delivered.Recipient = "Jane Doe <Jane.Doe@Example.COM.>"
	bounced := statusEvent("jane_bounced", "msg_jane", domain.StatusBounced, domain.BounceHard, at(20))
	bounced.Recipient = delivered.Recipient
	late := statusEvent("jane_late", "msg_jane", domain.StatusDelivered, "", at(5)) // occurred before: stale
	late.Recipient = delivered.Recipient
	late2 := statusEvent("jane_late2", "msg_jane", domain.StatusDelivered, "", at(6))
	late3 := statusEvent("jane_late3", "msg_jane", domain.StatusDelivered, "", at(7))
	process(delivered, bounced, late, late2, late3)
	bob := statusEvent("bob_accepted", "msg_bob", domain.StatusAccepted, "", at(1))
	bob.Recipient = "bob@example.com"
	process(bob)
	other := statusEvent("other_accepted", "msg_other", domain.StatusAccepted, "", at(1))
	other.Provider = "sendgrid"
	process(other)
	waiting := kindEvent("jane_waiting", "msg_jane", domain.KindOpened, at(30))
	_, err := storetest.Enqueue(ctx, s, waiting)
	require.NoError(t, err)
	stuck := statusEvent("stuck", "msg_stuck", domain.StatusAccepted, "", at(2))
	_, err = storetest.Enqueue(ctx, s, stuck)
	require.NoError(t, err)
	require.NoError(t, s.Events.Quarantine(ctx, provider, "stuck", "Process", "refused"))
	held := statusEvent("held", "msg_held", domain.StatusAccepted, "", at(3))
	_, _, err = s.Events.RecordAccepted(ctx, held)
	require.NoError(t, err)

	ids := func(f store.EventFilter) []string {
		t.Helper()
		f.Limit = 2
		got := walkEvents(t, s, f, nil)
		slices.Sort(got)
		return got
	}
	yes, no := true, false
	assert.Equal(t, []string{"other_accepted"}, ids(store.EventFilter{Providers: []string{"sendgrid"}}))
	assert.Equal(t, []string{"jane_bounced"}, ids(store.EventFilter{Type: "email.bounced"}))
	// A rare outcome pages in the order applied (two pages of two, then one).
	assert.Equal(t, []string{"jane_late", "jane_late2", "jane_late3"}, ids(store.EventFilter{Outcome: string(domain.OutcomeStale)}))
	_, next, err := s.Explorer.ListEvents(ctx, store.EventFilter{Limit: 1})
	require.NoError(t, err)
	_, _, err = s.Explorer.ListEvents(ctx, store.EventFilter{Outcome: string(domain.OutcomeStale), After: next, Limit: 1})
	assert.ErrorIs(t, err, store.ErrBadCursor, "a cursor of the other order")
	janes := []string{"jane_bounced", "jane_delivered", "jane_late", "jane_late2", "jane_late3", "jane_waiting"}
	assert.Equal(t, janes, ids(store.EventFilter{MessageID: "msg_jane"}))
	for _, spelling := range []string{"jane.doe@example.com", "JANE.DOE@EXAMPLE.COM", "<Jane.Doe@example.com>", "Someone <jane.doe@example.com.>"} {
		assert.Equal(t, janes, ids(store.EventFilter{Recipient: spelling}), spelling)
	}
	assert.Empty(t, ids(store.EventFilter{Recipient: "doe@example.com"}))
	assert.Equal(t, []string{"jane_bounced"}, ids(store.EventFilter{Recipient: "jane.doe@example.com", Type: "email.bounced"}))
	assert.Equal(t, []string{"stuck"}, ids(store.EventFilter{Quarantined: &yes}))
	assert.NotContains(t, ids(store.EventFilter{Quarantined: &no}), "stuck")
	assert.Equal(t, []string{"held"}, ids(store.EventFilter{ThroughTemporal: &yes}))
	assert.NotContains(t, ids(store.EventFilter{ThroughTemporal: &no}), "held")

	var janeAt time.Time
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT received_at FROM webhook_events WHERE event_id = 'jane_waiting'`).Scan(&janeAt))
	assert.Equal(t, []string{"jane_waiting"}, ids(store.EventFilter{Since: janeAt, Until: janeAt.Add(time.Microsecond)}))

	list, _, err := s.Explorer.ListEvents(ctx, store.EventFilter{MessageID: "msg_jane", Limit: 10})
	require.NoError(t, err)
	states := map[string]string{}
	for _, e := range list {
		states[e.EventID] = e.State + "/" + e.Outcome
		assert.Equal(t, provider+":"+e.EventID, e.WorkflowID)
	}
	assert.Equal(t, map[string]string{"jane_bounced": "processed/moved", "jane_delivered": "processed/moved",
		"jane_late": "processed/stale", "jane_late2": "processed/stale", "jane_late3": "processed/stale", "jane_waiting": "waiting/"}, states)
}

// An erased address is found nowhere: the explorer finds none of its events, and the timeline
// of its message shows no recipient.
func TestExplorerFindsAnErasedAddressNowhere(t *testing.T) {
	t.Parallel()
	s := storetest.OpenURL(t, storetest.NewDatabase(t), store.Options{ErasureHasher: erasureHasher(t)})
	ctx := t.Context()
	loadPerson(t, s, "jane", janeMixed)
	loadPerson(t, s, "bob", bobAddress)
	found, _, err := s.Explorer.ListEvents(ctx, store.EventFilter{Recipient: janeAddress, Limit: 100})
	require.NoError(t, err)
	require.NotEmpty(t, found, "before the erasure")
	_, err = s.Erase(ctx, store.ErasureRequest{Address: janeAddress, ErasedBy: "ops", Reason: "art. 17"})
	require.NoError(t, err)
	found, _, err = s.Explorer.ListEvents(ctx, store.EventFilter{Recipient: janeAddress, Limit: 100})
	require.NoError(t, err)
	assert.Empty(t, found)
	tl, err := s.Explorer.Timeline(ctx, provider, "msg_jane", store.TimelinePage{}, nil)
	require.NoError(t, err)
	assert.Empty(t, tl.Recipient)
	found, _, err = s.Explorer.ListEvents(ctx, store.EventFilter{Recipient: bobAddress, Limit: 100})
	require.NoError(t, err)
	assert.NotEmpty(t, found, "another address is still found")
}

func testCodec(t *testing.T, id string) *codec.Codec {
	t.Helper()
	c, err := codec.New([]codec.Key{{ID: id, Secret: bytes.Repeat([]byte(id[:1]), codec.KeySize)}}, id)
	require.NoError(t, err)
	return c
}

// With the payload codec, a kept body is sealed in PostgreSQL and opened for reading (and so for
// a retry); without one it is kept as it came; a sealed body no configured key opens reads as
// unreadable; and an erasure judges a sealed body on what it opens to.
func TestRejectedBodiesGoThroughThePayloadCodec(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewDatabase(t)
	sealed := storetest.OpenURL(t, dbURL, store.Options{BodyCodec: testCodec(t, "k1"), ErasureHasher: erasureHasher(t)})
	plain := storetest.OpenURL(t, dbURL, store.Options{})
	ctx := t.Context()
	jane := []byte(`{"to":"` + janeMixed + `"}`)
	bob := []byte(`{"to":"bob@example.com"}`)
	require.NoError(t, sealed.Rejected.InsertRejected(ctx, []store.RejectedRequest{
		{Endpoint: "postscale", ReceivedAt: at(0), Cause: "bad_signature", Status: 401, Header: map[string][]string{}, Body: jane},
		{Endpoint: "postscale", ReceivedAt: at(0), Cause: "bad_signature", Status: 401, Header: map[string][]string{}, Body: bob},
	}, nil))
	require.NoError(t, plain.Rejected.InsertRejected(ctx, []store.RejectedRequest{
		{Endpoint: "postscale", ReceivedAt: at(0), Cause: "unparsable", Status: 400, Header: map[string][]string{}, Body: bob},
	}, nil))
	var rawJane []byte
	require.NoError(t, sealed.Pool().QueryRow(ctx, `SELECT body FROM rejected_requests WHERE id = 1`).Scan(&rawJane))
	assert.NotContains(t, string(rawJane), "Doe", "stored sealed")

	for id, want := range map[int64][]byte{1: jane, 2: bob, 3: bob} {
		r, err := sealed.Rejected.GetRejected(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(r.Body), "row %d read through the codec", id)
		assert.False(t, r.BodyUnreadable)
	}
	r, err := plain.Rejected.GetRejected(ctx, 3)
	require.NoError(t, err)
	assert.Equal(t, string(bob), string(r.Body), "kept as it came without a codec")
	r, err = plain.Rejected.GetRejected(ctx, 1)
	require.NoError(t, err)
	assert.True(t, r.BodyUnreadable, "no key opens it")
	assert.Nil(t, r.Body)
	r, err = storetest.OpenURL(t, dbURL, store.Options{BodyCodec: testCodec(t, "k2")}).Rejected.GetRejected(ctx, 2)
	require.NoError(t, err)
	assert.True(t, r.BodyUnreadable, "another key does not open it")

	_, err = sealed.Erase(ctx, store.ErasureRequest{Address: janeAddress, ErasedBy: "ops", Reason: "art. 17"})
	require.NoError(t, err)
	var left []int64
	rows, err := sealed.Pool().Query(ctx, `SELECT id FROM rejected_requests ORDER BY id`)
	require.NoError(t, err)
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		left = append(left, id)
	}
	assert.Equal(t, []int64{2, 3}, left, "the sealed body naming the address went; the others stay")
}

// A busy message's timeline is read a page at a time: forward with next_after and back with
// prev_before, every event once in arrival order (batches share a received_at), each page with
// its own events' notifications only; a cursor of another list is refused.
func TestTimelinePagesBothWays(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := t.Context()
	var want []string
	for batch := range 3 {
		var evs []domain.Event
		for i := range 4 {
			id := fmt.Sprintf("busy_%d_%d", batch, i)
			evs = append(evs, kindEvent(id, "msg_busy", domain.KindOpened, at(batch*10+i)))
			want = append(want, id)
		}
		_, err := storetest.Enqueue(ctx, s, evs...) // one statement: one received_at for the batch
		require.NoError(t, err)
		for _, ev := range evs {
			_, err := s.Events.Process(ctx, ev.Provider, ev.EventID, false, rules)
			require.NoError(t, err)
			_, err = s.Pool().Exec(ctx, `INSERT INTO notifications (id, provider, event_id, sink, type, body) VALUES ($1, $2, $3, 'app', 'message.opened', '{}')`,
				"n_"+ev.EventID, ev.Provider, ev.EventID)
			require.NoError(t, err)
		}
	}
	lone := kindEvent("lone", "msg_lone", domain.KindOpened, at(1))
	_, err := storetest.Enqueue(ctx, s, lone)
	require.NoError(t, err)

	check := func(tl store.Timeline) []string {
		t.Helper()
		var ids []string
		for _, e := range tl.Events {
			ids = append(ids, e.EventID)
		}
		var notified []string
		for _, sk := range tl.Sinks {
			for _, n := range sk.Notifications {
				notified = append(notified, n.EventID)
			}
		}
		assert.ElementsMatch(t, ids, notified, "a page's notifications are its events'")
		assert.ElementsMatch(t, ids, tl.OccurrenceOrder)
		return ids
	}
	var seen []string
	page := store.TimelinePage{Limit: 5}
	var last store.Timeline
	for n := 0; ; n++ {
		require.Less(t, n, 10)
		tl, err := s.Explorer.Timeline(ctx, provider, "msg_busy", page, nil)
		require.NoError(t, err)
		assert.Equal(t, n > 0, tl.PrevBefore != "", "page %d: earlier events", n)
		seen = append(seen, check(tl)...)
		last = tl
		if tl.NextAfter == "" {
			break
		}
		page = store.TimelinePage{Limit: 5, After: tl.NextAfter}
	}
	assert.Equal(t, want, seen, "forward: each event once, in arrival order")

	var back []string
	page = store.TimelinePage{Limit: 5, Before: last.PrevBefore}
	for n := 0; page.Before != ""; n++ {
		require.Less(t, n, 10)
		tl, err := s.Explorer.Timeline(ctx, provider, "msg_busy", page, nil)
		require.NoError(t, err)
		assert.NotEmpty(t, tl.NextAfter, "a page before another has later events")
		back = append(check(tl), back...)
		page.Before = tl.PrevBefore
	}
	assert.Equal(t, want[:len(want)-len(last.Events)], back, "backward: the events before the last page, once, in order")

	whole, err := s.Explorer.Timeline(ctx, provider, "msg_lone", store.TimelinePage{}, nil)
	require.NoError(t, err)
	assert.Equal(t, "lone", whole.Events[0].EventID, "an ordinary message is one page")
	assert.Len(t, whole.Events, 1)
	assert.Empty(t, whole.NextAfter)
	assert.Empty(t, whole.PrevBefore)

	_, err = s.Explorer.Timeline(ctx, provider, "msg_busy", store.TimelinePage{After: "not-a-cursor"}, nil)
	assert.ErrorIs(t, err, store.ErrBadCursor)
	_, eventsNext, err := s.Explorer.ListEvents(ctx, store.EventFilter{Limit: 1})
	require.NoError(t, err)
	require.NotEmpty(t, eventsNext)
	_, err = s.Explorer.Timeline(ctx, provider, "msg_busy", store.TimelinePage{After: eventsNext}, nil)
	assert.ErrorIs(t, err, store.ErrBadCursor, "another list's cursor")
	_, err = s.Explorer.Timeline(ctx, provider, "msg_none", store.TimelinePage{}, nil)
	assert.ErrorIs(t, err, domain.ErrNotFound)
}
