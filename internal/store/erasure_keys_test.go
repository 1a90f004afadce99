package store_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/erasure"
	mhprovider "github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/postmark"
	"github.com/mailhook/mailhook/internal/provider/ses"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

// Rows that versions before 2026-12-02 keyed with the address (a Postmark derived id, an SES
// notification to several recipients: its event ids and message keys) are re-keyed by the
// erasure to the keys this version gives the same events: no column holds the address, the
// message keeps its history, a replay keeps its row, and the provider's retry of each event is
// still a duplicate. The other recipient's rows are not touched.
func TestEraseReKeysWhatPriorVersionsKeyedByTheAddress(t *testing.T) {
	t.Parallel()
	s := storetest.OpenWith(t, store.Options{ErasureHasher: erasureHasher(t), ErasurePriorKeys: priorKeys})
	ctx := t.Context()
	record := func(ev domain.Event, notify bool) {
		t.Helper()
		_, err := s.Events.RecordEvent(ctx, ev)
		require.NoError(t, err)
		_, err = s.Events.ApplyStatus(ctx, ev, rules)
		require.NoError(t, err)
		if notify {
			_, err = s.Notifications.EnsureNotification(ctx, delivery.Notification{Provider: ev.Provider, EventID: ev.EventID, Sink: "app",
				Type: domain.TypeStatusChanged, MessageID: ev.MessageID, Version: 1,
				Body: json.RawMessage(fmt.Sprintf(`{"data":{"event_id":%q,"message_id":%q}}`, ev.EventID, ev.MessageID))})
			require.NoError(t, err)
		}
	}

	// Postmark: the record as parsing gives it now, and as the version before recorded it.
	pm, err := postmark.New(mhprovider.Settings{Secrets: []string{"user:pass"}})
	require.NoError(t, err)
	const pmMessage = "883953f4-6105-42a2-a16a-77a8eac79483"
	body := fmt.Sprintf(`{"RecordType":"Delivery","ServerID":23,"MessageStream":"outbound","MessageID":%q,
		"Recipient":%q,"DeliveredAt":"2026-11-30T16:33:54.9070259Z","Details":"delivered"}`, pmMessage, janeMixed)
	parsed, err := pm.Parse(mhprovider.Request{Header: http.Header{}, Body: []byte(body)})
	require.NoError(t, err)
	delivery := parsed[0]
	require.NotEmpty(t, delivery.PriorEventID)
	before := delivery
	before.EventID, before.PriorEventID = delivery.PriorEventID, ""
	record(before, true)
	_, err = s.Replays.ReserveReplay(ctx, before.Provider, before.EventID, before.Provider+":"+before.EventID+":replay:", false, "ops")
	require.NoError(t, err)

	// SES: a hard bounce to Jane and Bob in one notification, keyed as the version before did.
	const snsID, mailID = "b5d0a1e4-2f60-5c2b-9f4f-6b7c2a1d9e01", "0100018c5e2b1a7f-example"
	sesEvent := func(address string) domain.Event {
		return domain.Event{Provider: "ses", EventID: snsID + ":" + address, Type: "Bounce", Kind: domain.KindStatus,
			Status: domain.StatusBounced, BounceType: domain.BounceHard, MessageID: mailID + ":" + address, Recipient: address,
			OccurredAt: at(1), Raw: json.RawMessage(fmt.Sprintf(`{"Message":"bounce of %s"}`, address))}
	}
	record(sesEvent(janeAddress), true)
	record(sesEvent(bobAddress), true)
	janeEvent := snsID + ":" + mhprovider.RecipientTag(snsID, janeAddress)
	janeMessage := mailID + ":" + mhprovider.RecipientTag(mailID, janeAddress)

	hits, err := storetest.Hits(ctx, s.Pool(), janeAddress)
	require.NoError(t, err)
	for _, col := range []string{"webhook_events.event_id", "message_events.event_id", "notifications.event_id", "replays.workflow_id",
		"suppressions.event_id", "messages.message_id", "notifications.message_id"} {
		require.NotZero(t, hits[col], "the test keys %s with the address, as the version before did: %v", col, hits)
	}
	bobBefore, err := storetest.Snapshot(ctx, s.Pool())
	require.NoError(t, err)

	// The runs whose workflow IDs held Jane's address are found for the workflow to delete
	// before the first change (internal/e2e deletes them for real), Bob's are not; once the rows
	// are re-keyed, none is left to find.
	req := store.ErasureRequest{Address: janeAddress, ErasedBy: "ops"}
	job, err := s.Erasures.StartErasure(ctx, req)
	require.NoError(t, err)
	runs, err := s.Erasures.ErasureRuns(ctx, job.ID)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"postmark:" + before.EventID, "postmark:" + before.EventID + ":replay:1",
		"ses:" + snsID + ":" + janeAddress}, runs)
	_, err = s.Erase(ctx, req) // joins the job
	require.NoError(t, err)
	job, err = s.Erasures.StartErasure(ctx, req)
	require.NoError(t, err)
	runs, err = s.Erasures.ErasureRuns(ctx, job.ID)
	require.NoError(t, err)
	assert.Empty(t, runs, "after the re-keying")
	_, err = s.Erasures.FinishErasure(ctx, job.ID, store.ErasureDone)
	require.NoError(t, err)

	hits, err = storetest.Hits(ctx, s.Pool(), janeAddress)
	require.NoError(t, err)
	assert.Empty(t, hits, "columns that still hold the erased address")

	// Each event is under the key parsing gives it now, so the provider's retry is a duplicate.
	for _, ev := range []domain.Event{delivery, {Provider: "ses", EventID: janeEvent, Type: "Bounce", Kind: domain.KindStatus}} {
		res, err := s.Events.RecordEvent(ctx, ev)
		require.NoError(t, err)
		assert.False(t, res.Inserted, "a retry of %s:%s after the erasure", ev.Provider, ev.EventID)
	}
	// The messages keep their history under their keys; the replay follows its event.
	m, err := s.Messages.GetMessage(ctx, "postmark", pmMessage)
	require.NoError(t, err)
	require.Len(t, m.Events, 1)
	assert.Equal(t, delivery.EventID, m.Events[0].EventID)
	m, err = s.Messages.GetMessage(ctx, "ses", janeMessage)
	require.NoError(t, err)
	assert.Equal(t, domain.StatusBounced, m.Status)
	require.Len(t, m.Events, 1)
	assert.Equal(t, janeEvent, m.Events[0].EventID)
	var workflowID string
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT workflow_id FROM replays WHERE provider = 'postmark'`).Scan(&workflowID))
	assert.Equal(t, "postmark:"+delivery.EventID+":replay:1", workflowID)
	ev, _, _, err := s.Events.StoredEvent(ctx, "ses", janeEvent)
	require.NoError(t, err)
	assert.Equal(t, janeMessage, ev.MessageID, "the stored event names its message by the key it has now")
	sups, err := s.Suppressions.AddressSuppressions(ctx, janeAddress)
	require.NoError(t, err)
	require.Len(t, sups, 1)
	assert.Equal(t, janeEvent, sups[0].EventID)
	assert.Equal(t, janeMessage, sups[0].MessageID)

	// Bob's rows, keys and all, are as they were.
	after, err := storetest.Snapshot(ctx, s.Pool())
	require.NoError(t, err)
	mentionsJane := func(_, row string) bool { return strings.Contains(strings.ToLower(row), janeAddress) }
	assert.Empty(t, storetest.Missing(bobBefore, after, mentionsJane), "rows that did not mention the address changed")
}

// priorKeys are the providers' rules, as serve wires them (serve.PriorKeys).
var priorKeys = erasure.PriorKeys{
	EventIDs:   map[string]func(string) (string, bool){postmark.Name: postmark.CurrentEventID, ses.Name: ses.CurrentEventID},
	MessageIDs: map[string]func(string) (string, bool){ses.Name: ses.CurrentMessageID},
}
