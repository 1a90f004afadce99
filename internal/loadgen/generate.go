package loadgen

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/precedence"
)

// Providers the generator speaks.
const (
	Postscale = "postscale"
	SendGrid  = "sendgrid"
)

// Action is what happened to a message, in a provider-neutral vocabulary; each provider spells
// it its own way in the body.
type Action int

// Actions. Sent, Deferred, Delivered, Bounced, Dropped and Complained are status events;
// Opened and Clicked engagement; Unsubscribed a flag; Inbound a received email (no message).
const (
	Sent Action = iota + 1
	Deferred
	Delivered
	Bounced
	Dropped
	Complained
	Opened
	Clicked
	Unsubscribed
	Inbound
)

var actionNames = map[Action]string{
	Sent: "sent", Deferred: "deferred", Delivered: "delivered", Bounced: "bounced", Dropped: "dropped",
	Complained: "complained", Opened: "opened", Clicked: "clicked", Unsubscribed: "unsubscribed", Inbound: "inbound",
}

func (a Action) String() string { return actionNames[a] }

// Status is the message status the action implies under mailhook's documented mapping
// (docs/ARCHITECTURE.md, "Status precedence"), or StatusNone for non-status actions. It is
// written down here independently of the provider parsers, so a parser that mis-maps a type
// fails the verdict instead of defining it.
func (a Action) Status() domain.Status {
	switch a {
	case Sent:
		return domain.StatusAccepted
	case Deferred:
		return domain.StatusDeferred
	case Delivered:
		return domain.StatusDelivered
	case Bounced:
		return domain.StatusBounced
	case Dropped:
		return domain.StatusFailed
	case Complained:
		return domain.StatusComplained
	}
	return domain.StatusNone
}

// Event is one generated provider event.
type Event struct {
	Provider   string
	EventID    string // the id mailhook dedupes on (Postscale id / derived inbound id, sg_event_id)
	MessageID  string // the message key mailhook stores ("" for inbound)
	Action     Action
	BounceType string // hard or soft, for Bounced
	OccurredAt time.Time
	Recipient  string
	// Body is the event's JSON: a whole Postscale request body, or one SendGrid batch element.
	Body []byte

	// meta: the body carries the sender's metadata and tags (GenOptions.Metadata).
	meta bool

	// Index is the event's position in Generator.Events.
	Index int
	cycle *Lifecycle
}

// Key is provider:event_id, mailhook's workflow ID.
func (e *Event) Key() string { return e.Provider + ":" + e.EventID }

// Lifecycle is one message's events, in the order they occurred, and the order they are sent.
type Lifecycle struct {
	Provider  string
	MessageID string
	Template  string
	Events    []*Event // occurred order
	Order     []int    // send order: indices into Events
	Shuffled  bool     // Order is not the occurred order
	next      int      // position in Order of the next event to send
}

// Done reports whether every event has been handed out.
func (l *Lifecycle) Done() bool { return l.next >= len(l.Order) }

// step is one action of a template, at an offset from the message's send time.
type step struct {
	a      Action
	at     time.Duration
	bounce string
	p      float64 // probability the step is present (0 means always)
}

type template struct {
	name      string
	weight    int
	providers string // "" = all, else the one provider it applies to
	steps     []step
}

// templates are the lifecycles the generator draws from. Weights are relative.
var templates = []template{
	{name: "delivered", weight: 40, steps: []step{{a: Sent}, {a: Delivered, at: 2 * time.Second}, {a: Opened, at: time.Minute, p: 0.5}, {a: Clicked, at: 2 * time.Minute, p: 0.2}}},
	{name: "deferred-delivered", weight: 10, steps: []step{{a: Sent}, {a: Deferred, at: 5 * time.Second}, {a: Delivered, at: 65 * time.Second}}},
	{name: "hard-bounce", weight: 10, steps: []step{{a: Sent}, {a: Bounced, at: 3 * time.Second, bounce: domain.BounceHard}}},
	{name: "deferred-soft-bounce", weight: 5, steps: []step{{a: Sent}, {a: Deferred, at: 5 * time.Second}, {a: Bounced, at: 4 * time.Hour, bounce: domain.BounceSoft}}},
	{name: "late-dsn", weight: 10, steps: []step{{a: Sent}, {a: Delivered, at: 2 * time.Second}, {a: Bounced, at: 10 * time.Minute, bounce: domain.BounceHard}}},
	{name: "complaint", weight: 5, steps: []step{{a: Sent}, {a: Delivered, at: 2 * time.Second}, {a: Opened, at: 5 * time.Minute, p: 0.5}, {a: Complained, at: time.Hour}}},
	{name: "unsubscribe", weight: 5, steps: []step{{a: Sent}, {a: Delivered, at: 2 * time.Second}, {a: Opened, at: time.Minute}, {a: Unsubscribed, at: 3 * time.Minute}}},
	{name: "dropped", weight: 3, providers: SendGrid, steps: []step{{a: Sent}, {a: Dropped, at: time.Second}}},
	{name: "inbound", weight: 4, providers: Postscale, steps: []step{{a: Inbound}}},
}

// GenOptions shape what the generator produces.
type GenOptions struct {
	Seed int64
	// RunID is part of every id, so runs never collide and the verdict finds its own rows.
	RunID string
	// OutOfOrder is the share of lifecycles (with at least two events) sent in a shuffled order.
	OutOfOrder float64
	// Base is when the generated messages were "sent"; occurred_at times follow from it.
	Base time.Time
	// Metadata puts a sender's metadata and tags on every delivery event, where each provider
	// carries them (Postscale data.metadata and data.tags, SendGrid custom arguments beside
	// its category), so the accept path's cost with them can be measured (issue 42).
	Metadata bool
}

// Generator makes lifecycles and remembers every event it made. It is safe for concurrent use.
type Generator struct {
	mu     sync.Mutex
	o      GenOptions
	rng    *rand.Rand
	seq    int
	msgs   int
	Events []*Event
	Cycles []*Lifecycle
}

// NewGenerator returns a generator; the same options give the same lifecycles.
func NewGenerator(o GenOptions) *Generator {
	if o.Base.IsZero() {
		o.Base = time.Now().Add(-6 * time.Hour)
	}
	o.Base = o.Base.UTC().Truncate(time.Second)
	return &Generator{o: o, rng: rand.New(rand.NewPCG(uint64(o.Seed), 0x6d61696c686f6f6b))}
}

// Float64 is the generator's random source, for callers that must stay reproducible.
func (g *Generator) Float64() float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.rng.Float64()
}

// IntN is the generator's random source, for callers that must stay reproducible.
func (g *Generator) IntN(n int) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.rng.IntN(n)
}

// NewLifecycle generates one message's lifecycle for the provider.
func (g *Generator) NewLifecycle(provider string) *Lifecycle {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := g.pickTemplate(provider)
	g.msgs++
	l := &Lifecycle{Provider: provider, Template: t.name}
	// Messages are spread over an hour so their times interleave; seconds only, which every
	// provider's timestamp format carries exactly.
	start := g.o.Base.Add(time.Duration(g.rng.IntN(3600)) * time.Second)
	switch provider {
	case SendGrid:
		l.MessageID = fmt.Sprintf("sgm%s%06d", g.o.RunID, g.msgs)
	default:
		l.MessageID = fmt.Sprintf("msg_%s_%06d", g.o.RunID, g.msgs)
	}
	rcpt := fmt.Sprintf("rcpt-%s-%06d@loadtest.example", g.o.RunID, g.msgs)
	for _, s := range t.steps {
		if s.p > 0 && g.rng.Float64() >= s.p {
			continue
		}
		g.seq++
		ev := &Event{Provider: provider, Action: s.a, BounceType: s.bounce, OccurredAt: start.Add(s.at), Recipient: rcpt, Index: len(g.Events), cycle: l, meta: g.o.Metadata}
		switch {
		case s.a == Inbound:
			// The flat inbound shape has no id: mailhook derives "email.received:<email_id>".
			emailID := fmt.Sprintf("inb_%s_%06d", g.o.RunID, g.seq)
			ev.EventID = "email.received:" + emailID
			ev.MessageID = emailID // mailhook keys an inbound email by its email_id
			ev.Body = postscaleInbound(emailID, ev.OccurredAt)
			ev.Recipient = "support@loadtest.example"
		case provider == SendGrid:
			ev.EventID = fmt.Sprintf("sg%s%08d", g.o.RunID, g.seq)
			ev.MessageID = l.MessageID
			ev.Body = sendgridElement(ev)
		default:
			ev.EventID = fmt.Sprintf("evt_%s_%08d", g.o.RunID, g.seq)
			ev.MessageID = l.MessageID
			ev.Body = postscaleEnvelope(ev)
		}
		if s.a == Inbound {
			l.MessageID = ""
		}
		g.Events = append(g.Events, ev)
		l.Events = append(l.Events, ev)
	}
	l.Order = make([]int, len(l.Events))
	for i := range l.Order {
		l.Order[i] = i
	}
	if len(l.Events) > 1 && g.rng.Float64() < g.o.OutOfOrder {
		g.rng.Shuffle(len(l.Order), func(i, j int) { l.Order[i], l.Order[j] = l.Order[j], l.Order[i] })
		if sorted(l.Order) {
			// A shuffle can land on the identity; an out-of-order lifecycle must be one.
			for i, j := 0, len(l.Order)-1; i < j; i, j = i+1, j-1 {
				l.Order[i], l.Order[j] = l.Order[j], l.Order[i]
			}
		}
		l.Shuffled = true
	}
	g.Cycles = append(g.Cycles, l)
	return l
}

// Next hands out the lifecycle's next event in send order, or nil when it has none left.
func (l *Lifecycle) Next() *Event {
	if l.Done() {
		return nil
	}
	ev := l.Events[l.Order[l.next]]
	l.next++
	return ev
}

func sorted(order []int) bool {
	for i := 1; i < len(order); i++ {
		if order[i] < order[i-1] {
			return false
		}
	}
	return true
}

func (g *Generator) pickTemplate(provider string) template {
	total := 0
	for _, t := range templates {
		if t.providers == "" || t.providers == provider {
			total += t.weight
		}
	}
	n := g.rng.IntN(total)
	for _, t := range templates {
		if t.providers != "" && t.providers != provider {
			continue
		}
		if n < t.weight {
			return t
		}
		n -= t.weight
	}
	panic("unreachable")
}

var postscaleTypes = map[Action]struct{ typ, at string }{
	Sent: {"email.sent", "sent_at"}, Delivered: {"email.delivered", "delivered_at"},
	Deferred: {"email.deferred", "deferred_at"}, Bounced: {"email.bounced", "bounced_at"},
	Complained: {"email.complained", "complained_at"}, Opened: {"email.opened", "opened_at"},
	Clicked: {"email.clicked", "clicked_at"}, Unsubscribed: {"email.unsubscribed", "unsubscribed_at"},
}

// postscaleEnvelope is a Postscale envelope event, as documented in docs/providers (the
// simulator sends the same shape).
func postscaleEnvelope(ev *Event) []byte {
	t := postscaleTypes[ev.Action]
	at := ev.OccurredAt.Format(time.RFC3339)
	var extra strings.Builder
	fmt.Fprintf(&extra, `,%q:%q`, t.at, at)
	switch ev.Action {
	case Bounced:
		fmt.Fprintf(&extra, `,"bounce_type":%q,"diagnostic":%q`, ev.BounceType, bounceReply(ev.BounceType))
	case Clicked:
		extra.WriteString(`,"link":"https://app.loadtest.example/welcome"`)
	case Deferred:
		extra.WriteString(`,"diagnostic":"451 4.7.1 try again later"`)
	}
	if ev.meta {
		fmt.Fprintf(&extra, `,"metadata":{"customer_id":"cus_%s","order_id":"ord_%s","plan":"pro"},"tags":["receipt","loadtest"]`, ev.MessageID, ev.MessageID)
	}
	return fmt.Appendf(nil, `{"id":%q,"type":%q,"created_at":%q,"data":{"email_id":%q,"from":"hello@app.loadtest.example","to":%q,"subject":"Your receipt"%s}}`,
		ev.EventID, t.typ, at, ev.MessageID, ev.Recipient, extra.String())
}

// bounceReply is a remote server's reply that agrees with the bounce type: mailhook derives the
// type from the code when one is given (internal/bounce), so a soft bounce carrying a 5.1.1
// would be counted hard.
func bounceReply(bounceType string) string {
	if bounceType == domain.BounceSoft {
		return "452 4.2.2 mailbox full"
	}
	return "550 5.1.1 user unknown"
}

func postscaleInbound(emailID string, at time.Time) []byte {
	ts := at.Format(time.RFC3339)
	return fmt.Appendf(nil, `{"event":"email.received","timestamp":%q,"email_id":%q,"message_id":"<%s@customer.example>","from":"customer@customer.example","to":"support@loadtest.example","subject":"Question about my order","text":"Hello!","html":"<p>Hello!</p>","headers":[],"attachments":[],"spf":"pass","dkim":"pass"}`,
		ts, emailID, emailID)
}

var sendgridTypes = map[Action]string{
	Sent: "processed", Deferred: "deferred", Delivered: "delivered", Bounced: "bounce", Dropped: "dropped",
	Complained: "spamreport", Opened: "open", Clicked: "click", Unsubscribed: "unsubscribe",
}

// sendgridElement is one element of a SendGrid Event Webhook batch.
func sendgridElement(ev *Event) []byte {
	var extra strings.Builder
	switch ev.Action {
	case Bounced:
		typ, status := "bounce", "5.1.1" // hard
		if ev.BounceType == domain.BounceSoft {
			typ, status = "blocked", "4.2.2"
		}
		fmt.Fprintf(&extra, `,"type":%q,"reason":%q,"status":%q`, typ, bounceReply(ev.BounceType), status)
	case Dropped:
		extra.WriteString(`,"reason":"Bounced Address"`)
	case Deferred:
		extra.WriteString(`,"response":"400 try again later","attempt":"1"`)
	case Opened:
		extra.WriteString(`,"useragent":"Mozilla/5.0","ip":"203.0.113.7"`)
	case Clicked:
		extra.WriteString(`,"url":"https://app.loadtest.example/welcome","useragent":"Mozilla/5.0","ip":"203.0.113.7"`)
	}
	if ev.meta {
		fmt.Fprintf(&extra, `,"customer_id":"cus_%s","order_id":"ord_%s","plan":"pro"`, ev.MessageID, ev.MessageID)
	}
	return fmt.Appendf(nil, `{"email":%q,"timestamp":%s,"smtp-id":"<%s@loadtest.example>","event":%q,"category":["loadtest"],"sg_event_id":%q,"sg_message_id":"%s.filterdrecv-p3las1-5bf99c48d-5tmqs-18-5F1A2B3C-1A.0"%s}`,
		ev.Recipient, strconv.FormatInt(ev.OccurredAt.Unix(), 10), ev.MessageID, sendgridTypes[ev.Action], ev.EventID, ev.MessageID, extra.String())
}

// SendGridBatch joins elements into one request body.
func SendGridBatch(events []*Event) []byte {
	parts := make([][]byte, len(events))
	for i, ev := range events {
		parts[i] = ev.Body
	}
	out := []byte{'['}
	for i, p := range parts {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, p...)
	}
	return append(out, ']')
}

// Expected is the state a message must end in, given the events mailhook accepted for it.
type Expected struct {
	Status       domain.Status
	BounceType   string
	Opens        int64
	Clicks       int64
	Unsubscribed bool
	// History is how many events the message's history must list (every status, engagement
	// and unsubscribe event, stale ones included).
	History int
}

// NeutralEvent is the domain.Event mailhook's precedence fold sees for ev, built from the
// generator's own model (not from the parsers under test).
func NeutralEvent(ev *Event) domain.Event {
	kind := domain.KindStatus
	switch ev.Action {
	case Opened:
		kind = domain.KindOpened
	case Clicked:
		kind = domain.KindClicked
	case Unsubscribed:
		kind = domain.KindUnsubscribed
	case Inbound:
		kind = domain.KindInbound
	}
	return domain.Event{
		Provider: ev.Provider, EventID: ev.EventID, Kind: kind, Status: ev.Action.Status(),
		BounceType: ev.BounceType, MessageID: ev.MessageID, Recipient: ev.Recipient, OccurredAt: ev.OccurredAt,
	}
}

// ExpectedOf folds a message's events with internal/precedence, in the order given (the end
// state does not depend on it), counting each distinct event id once as mailhook does.
func ExpectedOf(events []*Event) Expected {
	var (
		st  precedence.State
		out Expected
	)
	seen := map[string]bool{}
	for _, ev := range events {
		if seen[ev.EventID] || ev.Action == Inbound {
			continue
		}
		seen[ev.EventID] = true
		out.History++
		switch ev.Action {
		case Opened:
			out.Opens++
		case Clicked:
			out.Clicks++
		case Unsubscribed:
			out.Unsubscribed = true
		default:
			st = precedence.Apply(st, NeutralEvent(ev)).Next
		}
	}
	out.Status, out.BounceType = st.Status, st.BounceType
	return out
}

// Request is one HTTP request the load generator sends: one Postscale event, or a SendGrid
// batch.
type Request struct {
	Provider string
	Events   []*Event
	Body     []byte
	// Dup: a re-send of an earlier request's body (a provider retry).
	Dup bool
	// Concurrent: send a second copy at the same time as this one.
	Concurrent bool
	// resendLater: once answered, queue a re-send.
	resendLater bool
	cycles      []*Lifecycle
}

// MixOptions shape the request stream.
type MixOptions struct {
	// Weights by provider, e.g. {postscale: 3, sendgrid: 1}.
	Weights map[string]int
	// DupShare is the share of requests that are re-sends of an earlier request (< 0.5).
	DupShare float64
	// DupConcurrent is the share of re-sends sent at the same moment as the original.
	DupConcurrent float64
	// MaxBatch bounds SendGrid batch sizes (1..MaxBatch events, from distinct messages).
	MaxBatch int
	// Width is how many lifecycles per provider interleave (ready to send their next event).
	Width int
}

// Source is the request stream: it interleaves lifecycles, never has two events of one message
// in flight at once (so an in-order lifecycle arrives in order), and re-sends a share of
// requests, some concurrently and some later. Safe for concurrent use.
type Source struct {
	mu       sync.Mutex
	g        *Generator
	o        MixOptions
	ready    map[string][]*Lifecycle
	resend   []pending
	issued   int
	provs    []string
	dupProb  float64
	Requests int // requests handed out (a concurrent copy counts)
}

type pending struct {
	due int
	req *Request
}

// NewSource builds a request stream over g.
func NewSource(g *Generator, o MixOptions) *Source {
	if o.MaxBatch < 1 {
		o.MaxBatch = 1
	}
	if o.Width < 1 {
		o.Width = 64
	}
	s := &Source{g: g, o: o, ready: map[string][]*Lifecycle{}}
	for _, p := range []string{Postscale, SendGrid} {
		if o.Weights[p] > 0 {
			s.provs = append(s.provs, p)
		}
	}
	d := min(max(o.DupShare, 0), 0.49)
	// A request gets a duplicate with probability q; duplicates are then q/(1+q) of requests.
	s.dupProb = d / (1 - d)
	return s
}

// Next returns the next request to send.
func (s *Source) Next() *Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.issued++
	for i, p := range s.resend {
		if p.due <= s.issued {
			s.resend = append(s.resend[:i], s.resend[i+1:]...)
			s.Requests++
			return p.req
		}
	}
	prov := s.pickProvider()
	n := 1
	if prov == SendGrid {
		n = 1 + s.g.IntN(s.o.MaxBatch)
	}
	req := &Request{Provider: prov}
	for range n {
		l := s.takeReady(prov)
		ev := l.Next()
		req.Events = append(req.Events, ev)
		req.cycles = append(req.cycles, l)
	}
	if prov == SendGrid {
		req.Body = SendGridBatch(req.Events)
	} else {
		req.Body = req.Events[0].Body
	}
	if s.g.Float64() < s.dupProb {
		if s.g.Float64() < s.o.DupConcurrent {
			req.Concurrent = true
		} else {
			req.resendLater = true
		}
	}
	s.Requests++
	if req.Concurrent {
		s.Requests++
	}
	return req
}

// Done returns a request's lifecycles to the ready set (so their next event can go) and
// queues its re-send, once the request has been answered.
func (s *Source) Done(req *Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range req.cycles {
		if !l.Done() {
			s.ready[l.Provider] = append(s.ready[l.Provider], l)
		}
	}
	if req.resendLater {
		dup := &Request{Provider: req.Provider, Events: req.Events, Body: req.Body, Dup: true}
		s.resend = append(s.resend, pending{due: s.issued + 1 + s.g.IntN(2*s.o.Width), req: dup})
	}
}

func (s *Source) pickProvider() string {
	if len(s.provs) == 1 {
		return s.provs[0]
	}
	total := 0
	for _, p := range s.provs {
		total += s.o.Weights[p]
	}
	n := s.g.IntN(total)
	for _, p := range s.provs {
		if n < s.o.Weights[p] {
			return p
		}
		n -= s.o.Weights[p]
	}
	return s.provs[0]
}

// takeReady takes a ready lifecycle (the oldest, so messages progress) or starts a new one
// while fewer than Width are ready.
func (s *Source) takeReady(prov string) *Lifecycle {
	r := s.ready[prov]
	if len(r) >= s.o.Width {
		l := r[0]
		s.ready[prov] = r[1:]
		return l
	}
	return s.g.NewLifecycle(prov)
}

// EventsJSON is a debugging aid: the generated events as JSON lines.
func EventsJSON(events []*Event) ([]byte, error) {
	type row struct {
		Provider, EventID, MessageID, Action, BounceType string
		OccurredAt                                       time.Time
	}
	var out []byte
	for _, ev := range events {
		b, err := json.Marshal(row{ev.Provider, ev.EventID, ev.MessageID, ev.Action.String(), ev.BounceType, ev.OccurredAt})
		if err != nil {
			return nil, err
		}
		out = append(append(out, b...), '\n')
	}
	return out, nil
}
