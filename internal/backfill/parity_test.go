package backfill_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/backfill"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	_ "github.com/mailhook/mailhook/internal/provider/mailgun"
	_ "github.com/mailhook/mailhook/internal/provider/postmark"
	"github.com/mailhook/mailhook/internal/providercounts"
)

func adapter(t *testing.T, name string) provider.Adapter {
	t.Helper()
	secret := "mailgun-signing-key"
	if name == "postmark" {
		secret = "user:password"
	}
	a, err := provider.New(name, provider.Settings{Secrets: []string{secret}})
	require.NoError(t, err)
	return a
}

func parseOne(t *testing.T, a provider.Adapter, body []byte) domain.Event {
	t.Helper()
	evs, err := a.Parse(provider.Request{Ctx: context.Background(), Body: body, Now: time.Now()})
	require.NoError(t, err)
	require.Len(t, evs, 1)
	return evs[0]
}

func fixture(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// same compares what dedupe and processing read of an event: its key, type, message and what
// it does.
func same(t *testing.T, webhook, listed domain.Event, what string) {
	t.Helper()
	assert.Equal(t, webhook.Provider, listed.Provider, what)
	assert.Equal(t, webhook.EventID, listed.EventID, "%s: the event id, which dedupe is on", what)
	assert.Equal(t, webhook.Type, listed.Type, what)
	assert.Equal(t, webhook.MessageID, listed.MessageID, what)
	assert.Equal(t, webhook.Kind, listed.Kind, what)
	assert.Equal(t, webhook.Status, listed.Status, what)
	assert.Equal(t, webhook.BounceType, listed.BounceType, what)
	assert.Equal(t, webhook.Recipient, listed.Recipient, what)
	assert.Equal(t, webhook.Stream, listed.Stream, what)
	assert.True(t, webhook.OccurredAt.Equal(listed.OccurredAt), what)
}

// Each Mailgun Events API item, listed through the lister from a page in the API's shape,
// parses into the event its webhook (the adapter's own fixtures) parses into.
func TestMailgunListedItemsParseLikeTheirWebhooks(t *testing.T) {
	page := fixture(t, "testdata/mailgun_events.json")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("page") == "2" {
			_, _ = w.Write([]byte(`{"items":[],"paging":{}}`))
			return
		}
		_, _ = w.Write([]byte(strings.ReplaceAll(string(page), `"NEXT"`, `"http://`+r.Host+`/v3/mg.example.com/events/next?page=2"`)))
	}))
	defer srv.Close()
	l, err := backfill.NewLister(backfill.Job{Provider: "mailgun", Since: time.Unix(1534100000, 0), Until: time.Unix(1534200000, 0),
		Settings: providercounts.Settings{BaseURL: srv.URL, APIKey: "key", Domain: "mg.example.com", Rate: 100}})
	require.NoError(t, err)
	p, err := l.Page(t.Context(), "")
	require.NoError(t, err)
	a := adapter(t, "mailgun")
	names := []string{"delivered", "failed_permanent", "failed_temporary", "opened", "complained"}
	require.Len(t, p.Bodies, len(names))
	for i, name := range names {
		webhook := parseOne(t, a, fixture(t, filepath.Join("../provider/mailgun/testdata", name+".json")))
		listed := parseOne(t, a, p.Bodies[i])
		same(t, webhook, listed, name)
		assert.JSONEq(t, string(webhook.Raw), string(listed.Raw), "%s: the stored raw event-data", name)
	}
	assert.False(t, p.Last)
	p, err = l.Page(t.Context(), p.Next)
	require.NoError(t, err)
	assert.True(t, p.Last, "an empty page ends the listing")
}

// A Bounce API item lacks the webhook's RecordType (and may lack MessageStream); given them back
// it parses into the event its webhook parses into: a hard bounce under "bounce:<ID>", a spam
// complaint as the SpamComplaint webhook, not as a bounce of type SpamComplaint.
func TestPostmarkBounceItemsParseLikeTheirWebhooks(t *testing.T) {
	var page struct {
		Bounces []json.RawMessage
	}
	require.NoError(t, json.Unmarshal(fixture(t, "testdata/postmark_bounces.json"), &page))
	a := adapter(t, "postmark")
	for i, name := range []string{"bounce_hard", "spam_complaint"} {
		assert.NotContains(t, string(page.Bounces[i]), "RecordType", "the API item has none")
		body, err := backfill.PostmarkWebhookBody(page.Bounces[i], "")
		require.NoError(t, err)
		webhook := parseOne(t, a, fixture(t, filepath.Join("../provider/postmark/testdata", name+".json")))
		listed := parseOne(t, a, body)
		same(t, webhook, listed, name)
	}
	// The complaint's item had no MessageStream: the default stream's, as listed.
	body, err := backfill.PostmarkWebhookBody(page.Bounces[1], "")
	require.NoError(t, err)
	assert.Contains(t, string(body), `"MessageStream":"outbound"`)
	body, err = backfill.PostmarkWebhookBody(page.Bounces[1], "broadcast")
	require.NoError(t, err)
	assert.Equal(t, "broadcast", parseOne(t, a, body).Stream)

	// An item that already says what it is keeps its bytes.
	body, err = backfill.PostmarkWebhookBody(json.RawMessage(`{"RecordType":"Bounce","MessageStream":"outbound","ID":1}`), "")
	require.NoError(t, err)
	assert.Equal(t, `{"RecordType":"Bounce","MessageStream":"outbound","ID":1}`, string(body))
	_, err = backfill.PostmarkWebhookBody(json.RawMessage(`null`), "")
	assert.ErrorIs(t, err, backfill.ErrRefused)
}
