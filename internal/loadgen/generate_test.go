package loadgen

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/postscale"
	"github.com/mailhook/mailhook/internal/provider/providertest"
	"github.com/mailhook/mailhook/internal/provider/sendgrid"
)

func newTestGenerator(seed int64, ooo float64) *Generator {
	return NewGenerator(GenOptions{Seed: seed, RunID: "t1", OutOfOrder: ooo, Base: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)})
}

func TestGeneratorIsDeterministic(t *testing.T) {
	a, b := newTestGenerator(7, 0.3), newTestGenerator(7, 0.3)
	for i := range 200 {
		prov := []string{Postscale, SendGrid}[i%2]
		la, lb := a.NewLifecycle(prov), b.NewLifecycle(prov)
		if la.Template != lb.Template || !slices.Equal(la.Order, lb.Order) || len(la.Events) != len(lb.Events) {
			t.Fatalf("lifecycle %d differs: %+v vs %+v", i, la, lb)
		}
		for j := range la.Events {
			if !bytes.Equal(la.Events[j].Body, lb.Events[j].Body) {
				t.Fatalf("lifecycle %d event %d body differs", i, j)
			}
		}
	}
}

func TestLifecyclesAreWellFormed(t *testing.T) {
	g := newTestGenerator(1, 0.5)
	ids := map[string]bool{}
	templatesSeen := map[string]bool{}
	for i := range 2000 {
		prov := []string{Postscale, SendGrid}[i%2]
		l := g.NewLifecycle(prov)
		templatesSeen[prov+"/"+l.Template] = true
		if len(l.Events) == 0 {
			t.Fatalf("empty lifecycle %+v", l)
		}
		for j, ev := range l.Events {
			if ids[ev.Key()] {
				t.Fatalf("event id %s generated twice", ev.Key())
			}
			ids[ev.Key()] = true
			if j > 0 && ev.OccurredAt.Before(l.Events[j-1].OccurredAt) {
				t.Fatalf("%s: events not in occurred order", l.MessageID)
			}
			if ev.Action != Inbound && ev.MessageID != l.MessageID {
				t.Fatalf("event %s has message %q, lifecycle %q", ev.EventID, ev.MessageID, l.MessageID)
			}
			if ev.OccurredAt.Nanosecond() != 0 {
				t.Fatalf("occurred_at %s has sub-second precision SendGrid cannot carry", ev.OccurredAt)
			}
		}
		perm := slices.Clone(l.Order)
		slices.Sort(perm)
		for k, v := range perm {
			if k != v {
				t.Fatalf("order %v is not a permutation", l.Order)
			}
		}
		if l.Shuffled == sorted(l.Order) {
			t.Fatalf("Shuffled=%v but order %v", l.Shuffled, l.Order)
		}
		// Handing out follows Order.
		var got []*Event
		for ev := l.Next(); ev != nil; ev = l.Next() {
			got = append(got, ev)
		}
		for k, idx := range l.Order {
			if got[k] != l.Events[idx] {
				t.Fatalf("Next handed out %s at %d, want %s", got[k].EventID, k, l.Events[idx].EventID)
			}
		}
	}
	for _, want := range []string{"postscale/inbound", "sendgrid/dropped", "postscale/late-dsn", "sendgrid/unsubscribe"} {
		if !templatesSeen[want] {
			t.Errorf("template %s never drawn in 2000 lifecycles", want)
		}
	}
	if templatesSeen["postscale/dropped"] || templatesSeen["sendgrid/inbound"] {
		t.Error("a provider-specific template was drawn for the other provider")
	}
}

func TestOutOfOrderShare(t *testing.T) {
	for _, share := range []float64{0, 0.3, 1} {
		g := newTestGenerator(3, share)
		multi, shuffled := 0, 0
		for range 3000 {
			l := g.NewLifecycle(Postscale)
			if len(l.Events) > 1 {
				multi++
				if l.Shuffled {
					shuffled++
				}
			}
		}
		got := float64(shuffled) / float64(multi)
		if got < share-0.05 || got > share+0.05 {
			t.Errorf("out-of-order %v: %.3f of multi-event lifecycles shuffled", share, got)
		}
	}
}

// TestBodiesParseAsModelled runs every generated body through mailhook's own provider adapters
// and checks they see the event the generator modelled, so the verdict's expectations and what
// mailhook is sent describe the same events.
func TestBodiesParseAsModelled(t *testing.T) {
	ps, err := postscale.New(provider.Settings{Secrets: []string{"whsec_test"}})
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sg, err := sendgrid.New(provider.Settings{Secrets: []string{providertest.SendGridPublicKey(&key.PublicKey)}})
	if err != nil {
		t.Fatal(err)
	}
	g := newTestGenerator(5, 0)
	var sgEvents []*Event
	for i := range 600 {
		prov := []string{Postscale, SendGrid}[i%2]
		l := g.NewLifecycle(prov)
		for _, ev := range l.Events {
			if prov == SendGrid {
				sgEvents = append(sgEvents, ev)
				continue
			}
			got, err := ps.Parse(provider.Request{Body: ev.Body})
			if err != nil || len(got) != 1 {
				t.Fatalf("postscale parse %s: %v (%d events)", ev.Body, err, len(got))
			}
			compareParsed(t, ev, got[0])
		}
	}
	// SendGrid: batches of up to 7 elements, signed and verified like a real request.
	for len(sgEvents) > 0 {
		n := min(len(sgEvents), 1+len(sgEvents)%7)
		batch := sgEvents[:n]
		sgEvents = sgEvents[n:]
		body := SendGridBatch(batch)
		now := time.Now()
		req := provider.Request{Header: signedSendGridHeader(key, body, now), Body: body, Now: now}
		if err := sg.Verify(req); err != nil {
			t.Fatalf("sendgrid verify: %v", err)
		}
		got, err := sg.Parse(req)
		if err != nil || len(got) != len(batch) {
			t.Fatalf("sendgrid parse %s: %v (%d events)", body, err, len(got))
		}
		for i := range batch {
			compareParsed(t, batch[i], got[i])
		}
	}
}

func compareParsed(t *testing.T, ev *Event, got domain.Event) {
	t.Helper()
	want := NeutralEvent(ev)
	if got.Provider != want.Provider || got.EventID != want.EventID || got.Kind != want.Kind ||
		got.Status != want.Status || got.BounceType != want.BounceType || got.MessageID != want.MessageID ||
		!got.OccurredAt.Equal(want.OccurredAt) || got.Recipient != want.Recipient {
		t.Fatalf("%s %s parsed as\n  %+v\nwant\n  %+v", ev.Provider, ev.Action, got, want)
	}
}

func TestExpectedOf(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mk := func(id string, a Action, off time.Duration, bounce string) *Event {
		return &Event{Provider: Postscale, EventID: id, MessageID: "m", Action: a, OccurredAt: at.Add(off), BounceType: bounce}
	}
	sent, delivered := mk("e1", Sent, 0, ""), mk("e2", Delivered, 2*time.Second, "")
	hard := mk("e3", Bounced, 10*time.Minute, domain.BounceHard)
	soft := mk("e4", Bounced, time.Hour, domain.BounceSoft)
	deferred := mk("e5", Deferred, time.Second, "")
	complained := mk("e6", Complained, time.Minute, "")
	dropped := mk("e7", Dropped, 10*time.Minute, "")
	open1, open2, click := mk("o1", Opened, time.Minute, ""), mk("o2", Opened, 2*time.Minute, ""), mk("c1", Clicked, 3*time.Minute, "")
	unsub := mk("u1", Unsubscribed, 4*time.Minute, "")

	cases := []struct {
		name   string
		events []*Event
		want   Expected
	}{
		{"delivered", []*Event{sent, delivered}, Expected{Status: domain.StatusDelivered, History: 2}},
		{"late hard bounce beats delivered", []*Event{sent, delivered, hard}, Expected{Status: domain.StatusBounced, BounceType: domain.BounceHard, History: 3}},
		{"deferred then soft bounce", []*Event{sent, deferred, soft}, Expected{Status: domain.StatusBounced, BounceType: domain.BounceSoft, History: 3}},
		{"complaint beats a later bounce", []*Event{hard, complained, sent}, Expected{Status: domain.StatusComplained, History: 3}},
		// failed and bounced share a rank: the later occurred_at wins.
		{"later of failed and bounced", []*Event{soft, dropped}, Expected{Status: domain.StatusBounced, BounceType: domain.BounceSoft, History: 2}},
		{"engagement counted once per id", []*Event{sent, open1, open1, open2, click, delivered, click},
			Expected{Status: domain.StatusDelivered, Opens: 2, Clicks: 1, History: 5}},
		{"unsubscribe flags", []*Event{delivered, unsub}, Expected{Status: domain.StatusDelivered, Unsubscribed: true, History: 2}},
		{"engagement only", []*Event{open1}, Expected{Opens: 1, History: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Every arrival order ends the same.
			permuteEvents(c.events, func(order []*Event) {
				if got := ExpectedOf(order); got != c.want {
					t.Fatalf("order %v: got %+v, want %+v", ids(order), got, c.want)
				}
			})
		})
	}
}

func TestExpectedOfGeneratedLifecycles(t *testing.T) {
	g := newTestGenerator(9, 1)
	for range 500 {
		l := g.NewLifecycle(SendGrid)
		inOrder := ExpectedOf(l.Events)
		sent := make([]*Event, 0, len(l.Events))
		for _, i := range l.Order {
			sent = append(sent, l.Events[i])
		}
		if got := ExpectedOf(sent); got != inOrder {
			t.Fatalf("%s (%s): shuffled %+v, in order %+v", l.MessageID, l.Template, got, inOrder)
		}
		// The last status event in occurred order decides, for these templates: each template
		// only moves up in rank over time.
		var last *Event
		for _, ev := range l.Events {
			if ev.Action.Status() != domain.StatusNone {
				last = ev
			}
		}
		if last != nil && inOrder.Status != last.Action.Status() {
			t.Fatalf("%s (%s): expected %s, last status event is %s", l.MessageID, l.Template, inOrder.Status, last.Action)
		}
	}
}

func permuteEvents(evs []*Event, visit func([]*Event)) {
	a := slices.Clone(evs)
	var rec func(k int)
	rec = func(k int) {
		if k == len(a) {
			visit(slices.Clone(a))
			return
		}
		for i := k; i < len(a); i++ {
			a[k], a[i] = a[i], a[k]
			rec(k + 1)
			a[k], a[i] = a[i], a[k]
		}
	}
	rec(0)
}

func ids(evs []*Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.EventID
	}
	return out
}

func TestSourceKeepsOneEventPerMessageInFlight(t *testing.T) {
	g := newTestGenerator(11, 0.3)
	s := NewSource(g, MixOptions{Weights: map[string]int{Postscale: 3, SendGrid: 1}, DupShare: 0.2, DupConcurrent: 0.5, MaxBatch: 8, Width: 16})
	inFlight := map[*Lifecycle]bool{}
	var outstanding []*Request
	reqs, dups, concurrent, batches := 0, 0, 0, 0
	sentOrder := map[*Lifecycle][]*Event{}
	for i := range 20000 {
		r := s.Next()
		reqs++
		if r.Concurrent {
			reqs++
			concurrent++
		}
		if r.Dup {
			dups++
		} else {
			if r.Provider == SendGrid {
				batches++
				if len(r.Events) < 1 || len(r.Events) > 8 {
					t.Fatalf("batch of %d", len(r.Events))
				}
			} else if len(r.Events) != 1 {
				t.Fatalf("postscale request with %d events", len(r.Events))
			}
			seen := map[*Lifecycle]bool{}
			for _, ev := range r.Events {
				l := ev.cycle
				if seen[l] || inFlight[l] {
					t.Fatalf("two events of %s in flight at once", l.MessageID)
				}
				seen[l] = true
				inFlight[l] = true
				sentOrder[l] = append(sentOrder[l], ev)
			}
		}
		outstanding = append(outstanding, r)
		// Answer requests in a scrambled order, keeping up to 40 outstanding.
		if len(outstanding) > 40 || i%97 == 0 {
			k := (i * 31) % len(outstanding)
			done := outstanding[k]
			outstanding = slices.Delete(outstanding, k, k+1)
			if !done.Dup {
				for _, ev := range done.Events {
					delete(inFlight, ev.cycle)
				}
			}
			s.Done(done)
		}
	}
	dupShare := float64(dups+concurrent) / float64(reqs)
	if dupShare < 0.17 || dupShare > 0.23 {
		t.Errorf("duplicates are %.3f of requests, want about 0.2", dupShare)
	}
	if c := float64(concurrent) / float64(dups+concurrent); c < 0.4 || c > 0.6 {
		t.Errorf("%.3f of duplicates concurrent, want about 0.5", c)
	}
	if batches == 0 {
		t.Error("no SendGrid batch")
	}
	// Each lifecycle's events went out in its send order.
	for l, evs := range sentOrder {
		for k, ev := range evs {
			if ev != l.Events[l.Order[k]] {
				t.Fatalf("%s: event %d sent out of its send order", l.MessageID, k)
			}
		}
	}
}

func TestSendGridBatch(t *testing.T) {
	evs := []*Event{{Body: []byte(`{"a":1}`)}, {Body: []byte(`{"b":2}`)}}
	if got := string(SendGridBatch(evs)); got != `[{"a":1},{"b":2}]` {
		t.Fatal(got)
	}
}

func TestActionStatusMapping(t *testing.T) {
	want := map[Action]domain.Status{Sent: domain.StatusAccepted, Deferred: domain.StatusDeferred, Delivered: domain.StatusDelivered,
		Bounced: domain.StatusBounced, Dropped: domain.StatusFailed, Complained: domain.StatusComplained,
		Opened: domain.StatusNone, Clicked: domain.StatusNone, Unsubscribed: domain.StatusNone, Inbound: domain.StatusNone}
	for a, s := range want {
		if a.Status() != s {
			t.Errorf("%s → %q, want %q", a, a.Status(), s)
		}
	}
	if fmt.Sprint(Bounced) != "bounced" {
		t.Error(fmt.Sprint(Bounced))
	}
}

// The accept path is measured with metadata on every event (issue 42): each provider's bodies
// carry it where that provider does, and stay valid JSON.
func TestMetadataOnEveryDeliveryEvent(t *testing.T) {
	for _, meta := range []bool{false, true} {
		g := NewGenerator(GenOptions{Seed: 3, RunID: "md", Metadata: meta})
		for range 20 {
			g.NewLifecycle(Postscale)
			g.NewLifecycle(SendGrid)
		}
		seen := 0
		for _, ev := range g.Events {
			if ev.Action == Inbound {
				continue
			}
			var o map[string]any
			if err := json.Unmarshal(ev.Body, &o); err != nil {
				t.Fatalf("%s body is not JSON: %v\n%s", ev.Provider, err, ev.Body)
			}
			where := o
			if ev.Provider == Postscale {
				where, _ = o["data"].(map[string]any)
			}
			var has bool
			switch ev.Provider {
			case Postscale:
				md, _ := where["metadata"].(map[string]any)
				has = md["customer_id"] == "cus_"+ev.MessageID && where["tags"] != nil
			case SendGrid:
				has = where["customer_id"] == "cus_"+ev.MessageID
			}
			if has != meta {
				t.Fatalf("metadata %v: %s event carries it: %v\n%s", meta, ev.Provider, has, ev.Body)
			}
			seen++
		}
		if seen == 0 {
			t.Fatal("no delivery events generated")
		}
	}
}
