package ses

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
)

const (
	snsID     = "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324" // MessageId of fakeSNS.notification
	snsStamp  = "2026-03-01T12:00:00.000Z"
	exampleID = "EXAMPLE7c191be45-e9aedb9a-02f9-4d12-a87d-dd0099a07f8a-000000"
	subID     = "EXAMPLEe4bccb684-777bc8de-afa7-4970-92b0-f515137b1497-000000"
)

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

// want is an expected event without Provider and Raw, which every event shares.
type want struct {
	EventID    string
	Type       string
	Kind       domain.Kind
	Status     domain.Status
	BounceType string
	MessageID  string
	Recipient  string
	OccurredAt time.Time
	Stream     string
	Bounce     domain.Bounce // the zero value: no details
}

func status(typ string, st domain.Status, msgID, rcpt, at string) want {
	return want{EventID: snsID, Type: typ, Kind: domain.KindStatus, Status: st, MessageID: msgID, Recipient: rcpt, OccurredAt: ts(at)}
}

func kind(typ string, k domain.Kind, msgID, rcpt, at string) want {
	return want{EventID: snsID, Type: typ, Kind: k, MessageID: msgID, Recipient: rcpt, OccurredAt: ts(at)}
}

func bounced(w want, bt string) want { w.BounceType = bt; return w }

// configSet is the configuration set of AWS's event publishing examples (mail.tags).
func configSet(w want) want { return streamed(w, "ConfigSet") }

func streamed(w want, stream string) want { w.Stream = stream; return w }

func details(w want, smtp int, code, category, diag string) want {
	w.Bounce = domain.Bounce{SMTPCode: smtp, EnhancedCode: code, Category: category, Diagnostic: diag}
	return w
}

func withIDs(w want, eventID, msgID string) want { w.EventID, w.MessageID = eventID, msgID; return w }

// fixtureWant holds the expectation of every testdata/*.json; a fixture without one fails.
var fixtureWant = map[string][]want{
	// Event publishing (eventType), AWS's documented examples.
	"event_bounce.json": {configSet(details(bounced(status("Bounce", domain.StatusBounced, exampleID, "recipient@example.com", "2017-08-05T00:41:02.669Z"), domain.BounceHard),
		550, "5.1.1", "unknown_user", "smtp; 550 5.1.1 user unknown"))},
	"event_complaint.json": {configSet(status("Complaint", domain.StatusComplained, exampleID, "recipient@example.com", "2017-08-05T00:41:02.669Z"))},
	"event_delivery.json":  {configSet(status("Delivery", domain.StatusDelivered, exampleID, "recipient@example.com", "2016-10-19T23:21:04.133Z"))},
	// Send has no timestamp of its own: mail.timestamp.
	"event_send.json": {configSet(status("Send", domain.StatusAccepted, exampleID, "recipient@example.com", "2016-10-14T05:02:16.645Z"))},
	// AWS's Reject example lists sender@example.com as the destination. SES rejects a message
	// with a virus: "Bad content".
	"event_reject.json": {configSet(details(status("Reject", domain.StatusFailed, exampleID, "sender@example.com", "2016-10-14T17:38:15.211Z"),
		0, "", "content_rejected", "Bad content"))},
	"event_open.json":  {configSet(kind("Open", domain.KindOpened, exampleID, "recipient@example.com", "2017-08-09T22:00:19.652Z"))},
	"event_click.json": {configSet(kind("Click", domain.KindClicked, exampleID, "recipient@example.com", "2017-08-09T23:51:25.570Z"))},
	"event_rendering_failure.json": {configSet(details(status("Rendering Failure", domain.StatusFailed, exampleID, "recipient@example.com", "2018-01-22T18:43:06.197Z"),
		0, "", "undetermined", "Attribute 'attributeName' is not present in the rendering data."))},
	"event_delivery_delay.json": {configSet(status("DeliveryDelay", domain.StatusDeferred, exampleID, "recipient@example.com", "2020-06-16T00:25:40.095Z"))},
	"event_subscription.json":   {configSet(kind("Subscription", domain.KindUnsubscribed, subID, "recipient@example.com", "2022-01-12T01:00:17.910Z"))},

	// Identity notifications (notificationType). These mails had three destinations, so each
	// recipient has its own message key.
	"notification_bounce_dsn.json": {details(bounced(status("Bounce", domain.StatusBounced,
		msgKey("00000138111222aa-33322211-cccc-cccc-cccc-ddddaaaa0680-000000", "jane@example.com"), "jane@example.com", "2016-01-27T14:59:38.237Z"), domain.BounceHard),
		550, "5.1.1", "unknown_user", "smtp; 550 5.1.1 <jane@example.com>... User")},
	// Permanent/General and no DSN: nothing names a cause, so no details.
	"notification_bounce_no_dsn.json": {
		withIDs(bounced(status("Bounce", domain.StatusBounced, "", "jane@example.com", "2016-01-27T14:59:38.237Z"), domain.BounceHard),
			snsID+":"+provider.RecipientTag(snsID, "jane@example.com"), msgKey("00000137860315fd-34208509-5b74-41f3-95c5-22c1edc3c924-000000", "jane@example.com")),
		withIDs(bounced(status("Bounce", domain.StatusBounced, "", "richard@example.com", "2016-01-27T14:59:38.237Z"), domain.BounceHard),
			snsID+":"+provider.RecipientTag(snsID, "richard@example.com"), msgKey("00000137860315fd-34208509-5b74-41f3-95c5-22c1edc3c924-000000", "richard@example.com")),
	},
	"notification_complaint.json": {status("Complaint", domain.StatusComplained,
		msgKey("000001378603177f-7a5433e7-8edb-42ae-af10-f0181f34d6ee-000000", "richard@example.com"), "richard@example.com", "2016-01-27T14:59:38.237Z")},
	"notification_delivery.json": {status("Delivery", domain.StatusDelivered,
		"0000014644fe5ef6-9a483358-9170-4cb4-a269-f5dcdf415321-000000", "jane@example.com", "2016-01-27T14:59:38.237Z")},
	// No mail object and no timestamp: unknown, dated by the SNS Timestamp.
	"notification_subscription_succeeded.json": {kind("AmazonSnsSubscriptionSucceeded", domain.KindUnknown, "", "", snsStamp)},

	// Derived variants.
	"derived_bounce_transient.json": {details(bounced(status("Bounce", domain.StatusBounced, exampleID, "recipient@example.com", "2017-08-05T00:41:02.669Z"), domain.BounceSoft),
		452, "4.2.2", "mailbox_full", "smtp; 452 4.2.2 mailbox full")},
	// A Transient bounce with a 5xx reply that is not about the address keeps SES's soft.
	"derived_bounce_too_large.json": {details(bounced(status("Bounce", domain.StatusBounced, exampleID, "recipient@example.com", "2017-08-05T00:41:02.669Z"), domain.BounceSoft),
		552, "5.3.4", "too_large", "smtp; 552 5.3.4 Message size exceeds fixed maximum message size")},
	// Each recipient's event has its own DSN; the configuration set is the stream.
	"derived_bounce_per_recipient.json": {
		withIDs(details(bounced(streamed(status("Bounce", domain.StatusBounced, "", "jane@example.com", "2017-08-05T00:41:02.669Z"), "marketing"), domain.BounceHard),
			550, "5.1.1", "unknown_user", "smtp; 550 5.1.1 <jane@example.com>: Recipient address rejected: User unknown in virtual mailbox table"),
			snsID+":"+provider.RecipientTag(snsID, "jane@example.com"), msgKey(exampleID, "jane@example.com")),
		withIDs(details(bounced(streamed(status("Bounce", domain.StatusBounced, "", "richard@example.com", "2017-08-05T00:41:02.669Z"), "marketing"), domain.BounceHard),
			554, "5.7.1", "spam_block", "smtp; 554 5.7.1 Service unavailable; Client host [192.0.2.10] blocked using zen.spamhaus.org"),
			snsID+":"+provider.RecipientTag(snsID, "richard@example.com"), msgKey(exampleID, "richard@example.com")),
	},
	"derived_bounce_undetermined.json": {bounced(status("Bounce", domain.StatusBounced, exampleID, "recipient@example.com", "2017-08-05T00:41:02.669Z"), domain.BounceSoft)},
	"derived_send_multi_destination.json": {
		withIDs(status("Send", domain.StatusAccepted, "", "jane@example.com", "2016-10-14T05:02:16.645Z"), snsID+":"+provider.RecipientTag(snsID, "jane@example.com"), msgKey(exampleID, "jane@example.com")),
		withIDs(status("Send", domain.StatusAccepted, "", "Mary@Example.com", "2016-10-14T05:02:16.645Z"), snsID+":"+provider.RecipientTag(snsID, "mary@example.com"), msgKey(exampleID, "mary@example.com")),
	},
	// SES does not say which of two recipients opened: one mail-level event.
	"derived_open_multi_destination.json": {kind("Open", domain.KindOpened, exampleID, "", "2017-08-09T22:00:19.652Z")},
	// Email receiving, the SNS action (AWS's example, content inline): one inbound event.
	"received_sns_action.json": {kind("Received", domain.KindInbound, "d6iitobk75ur44p8kdnnp7g2n800", "recipient@example.com", "2015-09-11T20:32:33.936Z")},
	// The S3 action's notification: the content by reference; the recipient is the one the
	// receipt rule matched, not the first destination.
	"received_s3_action.json": {kind("Received", domain.KindInbound, "o3v3f4bdi1svqvsa3ht5a2uf2ld5v5jn1ou3sgo1", "sales@example.com", "2015-09-11T20:32:34.1Z")},
	// Opting in is not an unsubscribe.
	"derived_subscription_opt_in.json": {kind("Subscription", domain.KindUnknown, subID, "recipient@example.com", "2022-01-12T01:00:17.910Z")},
}

// TestFixtures runs each fixture through the whole adapter, as the HTTP layer does: signed into
// an SNS envelope, Verify, Control (must not handle it), Parse.
func TestFixtures(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	f := newFakeSNS(t)
	a := f.adapter()
	seen := map[string]bool{}
	for _, path := range files {
		name := filepath.Base(path)
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			wants, ok := fixtureWant[name]
			if !ok {
				t.Fatalf("fixture %s has no expectation in fixtureWant", name)
			}
			msg, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			env := f.notification(string(msg))
			env.Timestamp = snsStamp
			for _, version := range []string{SignatureVersion1, SignatureVersion2} {
				req := request(sign(t, env, f.key, version))
				if err := a.Verify(req); err != nil {
					t.Fatalf("Verify (v%s): %v", version, err)
				}
				if handled, _, err := a.Control(req); handled || err != nil {
					t.Fatalf("Control = %v, %v; want not handled", handled, err)
				}
				events, err := a.Parse(req)
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				checkEvents(t, events, wants, req.Body)
			}
		})
	}
	for name := range fixtureWant {
		if !seen[name] {
			t.Errorf("fixtureWant names %s, which is not in testdata", name)
		}
	}
}

func checkEvents(t *testing.T, events []domain.Event, wants []want, body []byte) {
	t.Helper()
	if len(events) != len(wants) {
		t.Fatalf("got %d events, want %d: %+v", len(events), len(wants), events)
	}
	keys := map[string]bool{}
	for i, ev := range events {
		got := want{ev.EventID, ev.Type, ev.Kind, ev.Status, ev.BounceType, ev.MessageID, ev.Recipient, ev.OccurredAt, ev.Stream, domain.Bounce{}}
		if ev.Bounce != nil {
			got.Bounce = *ev.Bounce
		}
		if got != wants[i] {
			t.Errorf("event %d:\n got %+v\nwant %+v", i, got, wants[i])
		}
		if ev.Provider != Name {
			t.Errorf("event %d: provider %q", i, ev.Provider)
		}
		// The event id is a key, a workflow ID and a log field: no address.
		if strings.Contains(ev.EventID, "@") {
			t.Errorf("event %d: id %q holds an address", i, ev.EventID)
		}
		if !bytes.Equal(ev.Raw, body) {
			t.Errorf("event %d: Raw is not the SNS envelope", i)
		}
		if keys[ev.Key()] {
			t.Errorf("event %d: key %s repeats", i, ev.Key())
		}
		keys[ev.Key()] = true
	}
}

func parseMessage(t *testing.T, message string) ([]domain.Event, error) {
	t.Helper()
	env := Envelope{Type: TypeNotification, MessageID: snsID, TopicARN: testTopic, Message: message, Timestamp: snsStamp}
	return parse(env.Body())
}

func TestParseOccurredAtFallback(t *testing.T) {
	for name, tc := range map[string]struct{ msg, at string }{
		"own timestamp":  {`{"eventType":"Delivery","mail":{"messageId":"m","timestamp":"2020-01-01T00:00:00Z","destination":["a@x.io"]},"delivery":{"timestamp":"2020-01-01T00:00:05.5Z","recipients":["a@x.io"]}}`, "2020-01-01T00:00:05.5Z"},
		"mail timestamp": {`{"eventType":"Delivery","mail":{"messageId":"m","timestamp":"2020-01-01T00:00:00Z","destination":["a@x.io"]},"delivery":{"recipients":["a@x.io"]}}`, "2020-01-01T00:00:00Z"},
		"SNS timestamp":  {`{"eventType":"Delivery","mail":{"messageId":"m","destination":["a@x.io"]},"delivery":{"timestamp":"yesterday"}}`, snsStamp},
		"offset zone":    {`{"eventType":"Open","mail":{"messageId":"m"},"open":{"timestamp":"2020-01-01T02:00:00+02:00"}}`, "2020-01-01T00:00:00Z"},
	} {
		t.Run(name, func(t *testing.T) {
			events, err := parseMessage(t, tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			if !events[0].OccurredAt.Equal(ts(tc.at)) || events[0].OccurredAt.Location() != time.UTC {
				t.Fatalf("OccurredAt = %v, want %s in UTC", events[0].OccurredAt, tc.at)
			}
		})
	}
}

func TestParseRecipients(t *testing.T) {
	// Display names, case and repeats: one event per distinct address, keyed lower-cased.
	msg := `{"eventType":"Bounce","bounce":{"bounceType":"Permanent","bouncedRecipients":[
		{"emailAddress":"Jane Doe <Jane@Example.com>"},{"emailAddress":"jane@example.com"},
		{"emailAddress":" "},{"status":"5.1.1"},"bob@example.com",{"emailAddress":"carl@example.com"}]},
		"mail":{"messageId":"m1","destination":["jane@example.com","carl@example.com"]}}`
	events, err := parseMessage(t, msg)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range events {
		got = append(got, ev.EventID+" "+ev.MessageID+" "+ev.Recipient)
	}
	wantList := []string{
		snsID + ":" + provider.RecipientTag(snsID, "jane@example.com") + " " + msgKey("m1", "jane@example.com") + " Jane@Example.com",
		snsID + ":" + provider.RecipientTag(snsID, "bob@example.com") + " " + msgKey("m1", "bob@example.com") + " bob@example.com",
		snsID + ":" + provider.RecipientTag(snsID, "carl@example.com") + " " + msgKey("m1", "carl@example.com") + " carl@example.com",
	}
	if strings.Join(got, "\n") != strings.Join(wantList, "\n") {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantList, "\n"))
	}

	// A Delivery naming one of several destinations: event id alone, per-recipient message key.
	events, err = parseMessage(t, `{"eventType":"Delivery","mail":{"messageId":"m2","destination":["a@x.io","b@x.io"]},"delivery":{"recipients":["b@x.io"]}}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].EventID != snsID || events[0].MessageID != msgKey("m2", "b@x.io") || events[0].PriorMessageID != "m2:b@x.io" {
		t.Fatalf("got %+v", events)
	}

	// No recipients anywhere: one event for the mail.
	events, err = parseMessage(t, `{"eventType":"Send","mail":{"messageId":"m3"}}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].EventID != snsID || events[0].MessageID != "m3" || events[0].Recipient != "" {
		t.Fatalf("got %+v", events)
	}

	// A per-type list that is empty falls back to the destinations.
	events, err = parseMessage(t, `{"eventType":"Complaint","complaint":{"complainedRecipients":[]},"mail":{"messageId":"m4","destination":["a@x.io"]}}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].Recipient != "a@x.io" || events[0].MessageID != "m4" {
		t.Fatalf("got %+v", events)
	}
}

func TestParseSubscriptionPreferences(t *testing.T) {
	for name, tc := range map[string]struct {
		sub  string
		want domain.Kind
	}{
		"no preferences":  {`{}`, domain.KindUnsubscribed},
		"unsubscribe all": {`{"newTopicPreferences":{"unsubscribeAll":true}}`, domain.KindUnsubscribed},
		"topic opted out": {`{"newTopicPreferences":{"topicSubscriptionStatus":[{"topicName":"a","subscriptionStatus":"OptOut"}]},"oldTopicPreferences":{"topicSubscriptionStatus":[{"topicName":"a","subscriptionStatus":"OptIn"}]}}`, domain.KindUnsubscribed},
		"opted in":        {`{"newTopicPreferences":{"unsubscribeAll":false,"topicSubscriptionStatus":[{"topicName":"a","subscriptionStatus":"OptIn"}]}}`, domain.KindUnknown},
		"unchanged optout": {`{"newTopicPreferences":{"topicSubscriptionStatus":[{"topicName":"a","subscriptionStatus":"OptOut"},{"topicName":"b","subscriptionStatus":"OptIn"}]},
			"oldTopicPreferences":{"topicSubscriptionStatus":[{"topicName":"a","subscriptionStatus":"OptOut"}]}}`, domain.KindUnknown},
		"odd shape": {`{"newTopicPreferences":"yes"}`, domain.KindUnsubscribed},
	} {
		t.Run(name, func(t *testing.T) {
			events, err := parseMessage(t, `{"eventType":"Subscription","mail":{"messageId":"m","destination":["a@x.io"]},"subscription":`+tc.sub+`}`)
			if err != nil {
				t.Fatal(err)
			}
			if events[0].Kind != tc.want {
				t.Fatalf("kind = %s, want %s", events[0].Kind, tc.want)
			}
		})
	}
}

func TestParseUnknownTypesAreRecorded(t *testing.T) {
	events, err := parseMessage(t, `{"eventType":"SomethingNew","mail":{"messageId":"m","destination":["a@x.io","b@x.io"]}}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].Kind != domain.KindUnknown || events[0].MessageID != "m" || events[0].Status != "" {
		t.Fatalf("got %+v", events)
	}
	// eventType wins over notificationType when both are present.
	events, err = parseMessage(t, `{"eventType":"Open","notificationType":"Bounce","mail":{"messageId":"m"}}`)
	if err != nil || events[0].Kind != domain.KindOpened {
		t.Fatalf("got %+v, %v", events, err)
	}
}

func TestParseRejects(t *testing.T) {
	confirmation := Envelope{Type: TypeSubscriptionConfirmation, MessageID: "x", TopicARN: testTopic, Message: "{}", Timestamp: snsStamp}
	noID := Envelope{Type: TypeNotification, TopicARN: testTopic, Message: `{"eventType":"Send","mail":{"messageId":"m"}}`}
	for name, body := range map[string]string{
		"not JSON":          "nope",
		"confirmation":      string(confirmation.Body()),
		"no MessageId":      string(noID.Body()),
		"Message not JSON":  string((&Envelope{Type: TypeNotification, MessageID: "x", Message: SetupNotice}).Body()),
		"Message array":     string((&Envelope{Type: TypeNotification, MessageID: "x", Message: `[1]`}).Body()),
		"Message null":      string((&Envelope{Type: TypeNotification, MessageID: "x", Message: `null`}).Body()),
		"no type":           string((&Envelope{Type: TypeNotification, MessageID: "x", Message: `{"mail":{"messageId":"m"}}`}).Body()),
		"type not a string": string((&Envelope{Type: TypeNotification, MessageID: "x", Message: `{"eventType":7}`}).Body()),
		"no mail.messageId": string((&Envelope{Type: TypeNotification, MessageID: "x", Message: `{"eventType":"Bounce","mail":{}}`}).Body()),
		"mail not object":   string((&Envelope{Type: TypeNotification, MessageID: "x", Message: `{"eventType":"Click","mail":"m"}`}).Body()),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parse([]byte(body))
			if !errors.Is(err, provider.ErrBadRequest) {
				t.Fatalf("err = %v, want ErrBadRequest", err)
			}
			if strings.Contains(err.Error(), "@") {
				t.Fatalf("error echoes body content: %v", err)
			}
		})
	}
}

// TestEventJSON checks that an event, Raw included, survives the workflow's JSON encoding.
func TestEventJSON(t *testing.T) {
	events, err := parseMessage(t, `{"eventType":"Bounce","bounce":{"bounceType":"Permanent","bouncedRecipients":[{"emailAddress":"a@x.io"},{"emailAddress":"b@x.io"}]},"mail":{"messageId":"m"}}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		var back domain.Event
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if back.EventID != ev.EventID || back.MessageID != ev.MessageID || !json.Valid(back.Raw) {
			t.Fatalf("round trip: %+v", back)
		}
	}
}

// A multi-recipient notification's events carry, for the upgrade's dedupe, the ids versions
// before 2026-12-02 gave them, which held the address (id_legacy.go); a single recipient's event
// kept its id and has none.
func TestParsePriorIDsOfRecipientEvents(t *testing.T) {
	events, err := parseMessage(t, `{"eventType":"Bounce","bounce":{"bounceType":"Permanent","bouncedRecipients":[{"emailAddress":"Jane@Example.com"},{"emailAddress":"bob@example.com"}]},"mail":{"messageId":"m1","destination":["jane@example.com","bob@example.com"]}}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 2 || events[0].PriorEventID != snsID+":jane@example.com" || events[1].PriorEventID != snsID+":bob@example.com" {
		t.Fatalf("prior ids %+v", events)
	}
	if events[0].PriorMessageID != "m1:jane@example.com" || events[1].PriorMessageID != "m1:bob@example.com" ||
		strings.Contains(events[0].MessageID+events[1].MessageID, "@") {
		t.Fatalf("message keys %q, %q; prior %q, %q", events[0].MessageID, events[1].MessageID, events[0].PriorMessageID, events[1].PriorMessageID)
	}
	// Erasure re-keys the rows of those versions to the keys parsing gives now.
	for i, ev := range events {
		if id, ok := CurrentEventID(ev.PriorEventID); !ok || id != ev.EventID {
			t.Errorf("event %d: CurrentEventID(%q) = %q, %v; want %q", i, ev.PriorEventID, id, ok, ev.EventID)
		}
		if key, ok := CurrentMessageID(ev.PriorMessageID); !ok || key != ev.MessageID {
			t.Errorf("event %d: CurrentMessageID(%q) = %q, %v; want %q", i, ev.PriorMessageID, key, ok, ev.MessageID)
		}
		if _, ok := CurrentEventID(ev.EventID); ok {
			t.Errorf("event %d: the current id %q is taken for a prior one", i, ev.EventID)
		}
	}
	events, err = parseMessage(t, `{"eventType":"Delivery","mail":{"messageId":"m2","destination":["a@x.io"]},"delivery":{"recipients":["a@x.io"]}}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].EventID != snsID || events[0].PriorEventID != "" {
		t.Fatalf("a single recipient's event: id %q, prior %q", events[0].EventID, events[0].PriorEventID)
	}
}

// Recipients are one when mailaddr.Key says so (the domain's Unicode and ASCII forms, composed
// and decomposed spellings), and two when they may be two mailboxes (İvan and ivan), each with
// its own event; ids stay those of the versions before (the address lower-cased), so an SNS
// retry across the upgrade is still a duplicate (issue 41).
func TestParseRecipientsAreOneByMailboxKey(t *testing.T) {
	msg := `{"eventType":"Bounce","bounce":{"bounceType":"Permanent","bouncedRecipients":[
		{"emailAddress":"user@bücher.example","status":"5.1.1"},{"emailAddress":"user@xn--bcher-kva.example"},
		{"emailAddress":"user@bu\u0308cher.example"},{"emailAddress":"\u0130van@x.com","status":"5.1.2"},{"emailAddress":"ivan@x.com","status":"5.1.3"}]},
		"mail":{"messageId":"m1","destination":["user@bücher.example","\u0130van@x.com","ivan@x.com"]}}`
	events, err := parseMessage(t, msg)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range events {
		code := ""
		if ev.Bounce != nil {
			code = ev.Bounce.EnhancedCode
		}
		got = append(got, ev.EventID+" "+ev.Recipient+" "+code)
	}
	want := []string{
		snsID + ":" + provider.RecipientTag(snsID, "user@bücher.example") + " user@bücher.example 5.1.1",
		snsID + ":" + provider.RecipientTag(snsID, "ivan@x.com") + " \u0130van@x.com 5.1.2",
		snsID + ":" + provider.RecipientTag(snsID, "key:ivan@x.com") + " ivan@x.com 5.1.3",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// AWS's event-publishing examples carry the sender's message tags (myCustomTag1…) beside those
// SES adds itself (ses:configuration-set, ses:source-ip, ses:caller-identity…): only the
// sender's are metadata.
func TestParseMessageTagsAreMetadata(t *testing.T) {
	custom := func(v1, v2 string) map[string]string {
		return map[string]string{"myCustomTag1": v1, "myCustomTag2": v2}
	}
	for file, want := range map[string]map[string]string{
		"event_send":              custom("myCustomTagValue1", "myCustomTagValue2"),
		"event_delivery":          custom("myCustomTagValue1", "myCustomTagValue2"),
		"event_reject":            custom("myCustomTagValue1", "myCustomTagValue2"),
		"event_open":              custom("myCustomValue1", "myCustomValue2"),
		"event_click":             custom("myCustomValue1", "myCustomValue2"),
		"event_subscription":      custom("myCustomValue1", "myCustomValue2"),
		"event_bounce":            nil,
		"event_complaint":         nil,
		"event_delivery_delay":    nil,
		"event_rendering_failure": nil,
	} {
		t.Run(file, func(t *testing.T) {
			msg, err := os.ReadFile(filepath.Join("testdata", file+".json"))
			if err != nil {
				t.Fatal(err)
			}
			events, err := parseMessage(t, string(msg))
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range events {
				if !reflect.DeepEqual(ev.Metadata, want) || ev.Tags != nil || ev.MetadataDropped != 0 {
					t.Errorf("metadata %v, tags %v, dropped %d; want %v, no tags", ev.Metadata, ev.Tags, ev.MetadataDropped, want)
				}
			}
		})
	}
	// Several values of one tag are joined.
	events, err := parseMessage(t, `{"eventType":"Send","mail":{"messageId":"m","tags":{"team":["a","b"],"ses:source-ip":["192.0.2.1"]}}}`)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"team": "a,b"}; !reflect.DeepEqual(events[0].Metadata, want) {
		t.Errorf("metadata %v, want %v", events[0].Metadata, want)
	}
}

// An Open's and a Click's details, from AWS's examples.
func TestParseEngagement(t *testing.T) {
	for file, want := range map[string]domain.Engagement{
		"event_open": {IP: "192.0.2.1",
			UserAgent: "Mozilla/5.0 (iPhone; CPU iPhone OS 10_3_3 like Mac OS X) AppleWebKit/603.3.8 (KHTML, like Gecko) Mobile/14G60"},
		"event_click": {URL: "http://docs.aws.amazon.com/ses/latest/DeveloperGuide/send-email-smtp.html", IP: "192.0.2.1",
			UserAgent: "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/60.0.3112.90 Safari/537.36"},
	} {
		msg, err := os.ReadFile(filepath.Join("testdata", file+".json"))
		if err != nil {
			t.Fatal(err)
		}
		events, err := parseMessage(t, string(msg))
		if err != nil {
			t.Fatal(err)
		}
		if got := events[0].Engagement; got == nil || *got != want {
			t.Errorf("%s: engagement %+v, want %+v", file, got, want)
		}
	}
	events, err := parseMessage(t, `{"eventType":"Delivery","mail":{"messageId":"m"},"delivery":{"userAgent":"x"}}`)
	if err != nil || events[0].Engagement != nil {
		t.Errorf("a delivery has no engagement: %+v, %v", events[0].Engagement, err)
	}
}
