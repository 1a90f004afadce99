package loadgen

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mailhook/mailhook/internal/domain"
)

// typeStatusChanged is the notification type of a status change (the sink contract).
const typeStatusChanged = "message.status_changed"

// Check is one line of the verdict.
type Check struct {
	Name     string   `json:"name"`
	OK       bool     `json:"ok"`
	Detail   string   `json:"detail"`
	Examples []string `json:"examples,omitempty"`
}

type verdict struct{ checks []Check }

func (v *verdict) add(name string, failures []string, okDetail, failDetail string, args ...any) {
	c := Check{Name: name, OK: len(failures) == 0}
	if c.OK {
		c.Detail = okDetail
	} else {
		c.Detail = fmt.Sprintf("%d: ", len(failures)) + fmt.Sprintf(failDetail, args...)
		c.Examples = failures[:min(len(failures), 5)]
	}
	v.checks = append(v.checks, c)
}

func (v *verdict) fail(name, format string, args ...any) {
	v.checks = append(v.checks, Check{Name: name, Detail: fmt.Sprintf(format, args...)})
}

func (v *verdict) passed() bool {
	for _, c := range v.checks {
		if !c.OK {
			return false
		}
	}
	return len(v.checks) > 0
}

type eventRow struct {
	receivedAt  time.Time
	processedAt *time.Time
}

type notificationRow struct {
	id, eventID, provider, typ, status string
}

// apiMessage is the part of GET /v1/messages/:provider/:message_id the verdict reads.
type apiMessage struct {
	Status       string `json:"status"`
	BounceType   string `json:"bounce_type"`
	Version      int64  `json:"version"`
	Unsubscribed bool   `json:"unsubscribed"`
	Opens        int64  `json:"opens"`
	Clicks       int64  `json:"clicks"`
	Events       []struct {
		EventID string `json:"event_id"`
		Outcome string `json:"outcome"`
	} `json:"events"`
}

// verify reads mailhook's database and API and fills the verdict.
func (r *runner) verify(ctx context.Context, pool *pgxpool.Pool, rep *Report, v *verdict) error {
	all := r.gen.Events
	byProv := idsByProvider(all)

	// webhook_events rows of every event this run generated.
	rows := map[string]eventRow{}
	for prov, ids := range byProv {
		q, err := pool.Query(ctx, `SELECT event_id, received_at, processed_at FROM webhook_events WHERE provider = $1 AND event_id = ANY($2)`, prov, ids)
		if err != nil {
			return fmt.Errorf("read webhook_events: %w", err)
		}
		for q.Next() {
			var id string
			var row eventRow
			if err := q.Scan(&id, &row.receivedAt, &row.processedAt); err != nil {
				q.Close()
				return fmt.Errorf("read webhook_events: %w", err)
			}
			rows[prov+":"+id] = row
		}
		if err := q.Err(); err != nil {
			return fmt.Errorf("read webhook_events: %w", err)
		}
	}

	r.mu.Lock()
	states := make(map[*Event]evState, len(r.ev))
	for ev, s := range r.ev {
		states[ev] = *s
	}
	r.mu.Unlock()

	var missing, unprocessed, startedTwice, recordedUnacked []string
	type twiceAccepted struct {
		key string
		n   int
	}
	var twice []twiceAccepted
	throughTwice := map[string]int{} // provider → events accepted twice, once through Temporal
	throughCandidates := map[string]map[string]bool{}
	var recorded []*Event
	var e2e []time.Duration
	var firstAccept, lastProcessed time.Time
	processedInWindow := 0
	for _, ev := range all {
		s, sent := states[ev]
		row, ok := rows[ev.Key()]
		if ok {
			recorded = append(recorded, ev)
		}
		if !sent {
			if ok {
				recordedUnacked = append(recordedUnacked, ev.Key()+" (never sent?)")
			}
			continue
		}
		if s.startsAccepted > 1 {
			twice = append(twice, twiceAccepted{ev.Key(), s.startsAccepted})
		}
		if s.acked == 0 {
			if ok {
				recordedUnacked = append(recordedUnacked, ev.Key())
			}
			continue
		}
		if !ok {
			missing = append(missing, ev.Key())
			continue
		}
		if row.processedAt == nil {
			unprocessed = append(unprocessed, ev.Key())
			continue
		}
		p := *row.processedAt
		e2e = append(e2e, p.Sub(s.firstAccept))
		if firstAccept.IsZero() || s.firstAccept.Before(firstAccept) {
			firstAccept = s.firstAccept
		}
		if p.After(lastProcessed) {
			lastProcessed = p
		}
		if !p.Before(r.measureFrom) && p.Before(r.end) {
			processedInWindow++
		}
	}
	rep.EventsRecorded = len(recorded)
	rep.EventsProcessed = len(e2e)
	rep.EndToEnd = Summarize(e2e)
	if len(e2e) > 0 {
		rep.ProcessedPerSecOverall = float64(len(e2e)) / lastProcessed.Sub(r.start).Seconds()
		rep.ProcessedPerSecInWindow = float64(processedInWindow) / rep.WindowSeconds
		rep.LastProcessedAfterSendEnd = lastProcessed.Sub(r.end).Seconds()
	}
	// An event accepted through Temporal while PostgreSQL was down (its run carries it, and
	// stores it once PostgreSQL is back) is accepted again by the insert when a re-send arrives
	// after PostgreSQL's return and before its run stored it: two "accepted" answers, one row,
	// processed once (the checks below). Any other repeat is a failure.
	if len(twice) > 0 {
		keys := make([]string, 0, len(twice))
		for _, t := range twice {
			keys = append(keys, t.key)
		}
		through, err := acceptedThroughTemporal(ctx, r.o.TemporalAddress, r.o.TemporalNamespace, keys)
		if err != nil {
			rep.Notes = append(rep.Notes, "could not tell which events were accepted through Temporal: "+err.Error())
		}
		allowed := 0
		for _, t := range twice {
			if t.n == 2 && through[t.key] {
				allowed++
				throughTwice[t.key[:strings.IndexByte(t.key, ':')]]++
				continue
			}
			startedTwice = append(startedTwice, fmt.Sprintf("%s answered accepted %d times", t.key, t.n))
		}
		if allowed > 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%d events were answered accepted twice: once through Temporal while PostgreSQL was down, once by the insert of a re-send after it came back, before the event's run had stored it (one row each, processed once)", allowed))
		}
	}
	v.add("events recorded", missing, fmt.Sprintf("all %d accepted events are in webhook_events (one row each: primary key)", rep.EventsAccepted),
		"accepted events missing from webhook_events")
	if !r.o.NoDrain {
		v.add("events processed", unprocessed, fmt.Sprintf("all %d have processed_at", rep.EventsProcessed),
			"accepted events without processed_at")
	}
	// Every event is started once: across all its sends (duplicates, concurrent copies, batch
	// re-sends), mailhook reports exactly one "accepted" start. Fewer is possible only when a
	// request failed after its start succeeded (then its retry is a duplicate).
	distinct := map[string]int{}
	for ev, s := range states {
		if s.acked > 0 {
			distinct[ev.Provider]++
		}
	}
	unavailable := 0
	for k, n := range rep.Codes {
		if strings.HasPrefix(k, "5") || k == "transport error" {
			unavailable += n
		}
	}
	r.mu.Lock()
	var startProblems []string
	var startDetail []string
	for _, prov := range []string{Postscale, SendGrid} {
		acc, dup, d := r.startsAcc[prov]-throughTwice[prov], r.startsDup[prov], distinct[prov]
		if acc+dup == 0 {
			continue
		}
		startDetail = append(startDetail, fmt.Sprintf("%s %d accepted + %d duplicate starts for %d distinct events", prov, acc, dup, d))
		if acc > d && throughCandidates[prov] == nil {
			// A batch's answer counts its accepted events without naming them, so a batch event
			// accepted twice (as above: through Temporal, then by a re-send's insert) shows only
			// here. The bound is the events of the provider sent more than once whose run was
			// started through Temporal: only those can be explained that way.
			var keys []string
			for ev, st := range states {
				if ev.Provider == prov && st.sends > 1 && st.startsAccepted < 2 {
					keys = append(keys, ev.Key())
				}
			}
			through, err := acceptedThroughTemporal(ctx, r.o.TemporalAddress, r.o.TemporalNamespace, keys)
			if err != nil {
				rep.Notes = append(rep.Notes, "could not tell which events were accepted through Temporal: "+err.Error())
			}
			throughCandidates[prov] = through
			if extra := acc - d; extra <= len(through) {
				rep.Notes = append(rep.Notes, fmt.Sprintf("%s: %d more accepted starts than events, within the %d events sent more than once and accepted through Temporal (batch answers do not name their events)", prov, extra, len(through)))
				acc = d
			}
		}
		if acc > d || (acc < d && unavailable == 0) {
			startProblems = append(startProblems, fmt.Sprintf("%s: %d accepted starts for %d distinct events", prov, acc, d))
		}
	}
	r.mu.Unlock()
	v.add("one start per event", append(startedTwice, startProblems...), strings.Join(startDetail, "; "),
		"events not started exactly once")
	if len(recordedUnacked) > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d events were recorded although no request carrying them was answered 200 (a start that succeeded after its request timed out); they count in the expected states", len(recordedUnacked)))
	}
	if rep.EventsNotAccepted > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d events were never answered 200 after %d retries each (see the response codes)", rep.EventsNotAccepted, r.o.MaxRetries))
	}
	var rejected []string
	for k, n := range rep.Codes {
		if strings.HasPrefix(k, "4") {
			rejected = append(rejected, fmt.Sprintf("%s × %d", k, n))
		}
	}
	sort.Strings(rejected)
	v.add("no 4xx", rejected, "mailhook accepted every correctly signed request", "4xx answers to valid signed requests")
	if r.o.NoDrain {
		// Only the accept path was measured: the states and notifications come later.
		rep.Notes = append(rep.Notes, "--no-drain: processing was not waited for; only acceptance (one durable row per accepted event, one accepted answer each) is checked")
		return nil
	}

	// Messages: expected state from the recorded events, folded with internal/precedence.
	byMsg := map[string][]*Event{}
	for _, ev := range recorded {
		if ev.Action == Inbound {
			continue
		}
		k := ev.Provider + "/" + ev.MessageID
		byMsg[k] = append(byMsg[k], ev)
	}
	got, apiErrs := r.fetchMessages(ctx, byMsg)
	if len(apiErrs) > 0 {
		v.add("messages readable", apiErrs, "", "GET /v1/messages failed")
	}
	rep.MessagesChecked = len(byMsg)

	// Notifications: mailhook's rows for this run's events and this sink, and the sink's tally.
	var nrows []notificationRow
	for prov, ids := range byProv {
		q, err := pool.Query(ctx, `SELECT id, event_id, type, status FROM notifications WHERE provider = $1 AND event_id = ANY($2) AND sink = $3`, prov, ids, r.o.SinkName)
		if err != nil {
			return fmt.Errorf("read notifications: %w", err)
		}
		for q.Next() {
			n := notificationRow{provider: prov}
			if err := q.Scan(&n.id, &n.eventID, &n.typ, &n.status); err != nil {
				q.Close()
				return fmt.Errorf("read notifications: %w", err)
			}
			nrows = append(nrows, n)
		}
		if err := q.Err(); err != nil {
			return fmt.Errorf("read notifications: %w", err)
		}
	}
	received := r.sink.Notifications()
	ours := map[string]bool{}
	for _, ev := range all {
		ours[ev.EventID] = true
	}
	dbIDs := map[string]notificationRow{}
	var notSent, notReceived, unexpected []string
	byType := map[string]int{}
	for _, n := range nrows {
		dbIDs[n.id] = n
		byType[n.typ]++
		if n.status != "sent" {
			notSent = append(notSent, fmt.Sprintf("%s (%s of %s:%s) is %s", n.id, n.typ, n.provider, n.eventID, n.status))
		}
		if _, ok := received[n.id]; !ok {
			notReceived = append(notReceived, fmt.Sprintf("%s (%s of %s:%s)", n.id, n.typ, n.provider, n.eventID))
		}
	}
	deliveries, repeated, foreign := 0, 0, 0
	statusChanged := map[string][]Notification{}
	for id, n := range received {
		if !ours[n.EventID] {
			foreign++ // a notification of another run (a retry mailhook still had pending)
			continue
		}
		deliveries += n.Deliveries
		if n.Deliveries > 1 {
			repeated++
		}
		if _, ok := dbIDs[id]; !ok {
			unexpected = append(unexpected, fmt.Sprintf("%s (%s of %s)", id, n.Type, n.EventID))
		}
		if n.Type == typeStatusChanged {
			k := n.Provider + "/" + n.MessageID
			statusChanged[k] = append(statusChanged[k], n)
		}
	}
	rep.Notifications = NotificationStats{
		Expected: len(nrows), ByType: byType, DistinctReceived: len(received) - foreign,
		Deliveries: deliveries, RepeatedIDs: repeated, Foreign: foreign,
	}
	v.add("notifications sent", notSent, fmt.Sprintf("all %d notification rows for sink %q are sent", len(nrows), r.o.SinkName),
		"notification rows not sent")
	v.add("notification ids received", notReceived, fmt.Sprintf("the sink received every one of the %d ids", len(nrows)),
		"notification ids mailhook recorded as sent that the sink never received")
	v.add("no unexpected ids", unexpected, fmt.Sprintf("%d distinct ids received, %d deliveries (%d ids more than once: same id, allowed)", rep.Notifications.DistinctReceived, deliveries, repeated),
		"ids received that mailhook has no row for")
	if len(byMsg) > 0 && byType[typeStatusChanged] == 0 {
		v.fail("sink subscription", "no message.status_changed notification at all: configure sink %q with types [message.status_changed, …] and url http://%s/", r.o.SinkName, r.o.SinkListen)
	}
	st := r.sink.Stats()
	sig := []string{}
	if st.BadSig > 0 || st.BadBody > 0 || st.IDMismatch > 0 {
		sig = append(sig, fmt.Sprintf("bad signatures %d, undecodable bodies %d, id mismatches %d; last: %s", st.BadSig, st.BadBody, st.IDMismatch, st.LastError))
	}
	v.add("signatures", sig, "every notification carried a valid Standard Webhooks signature and matching webhook-id / Idempotency-Key / body id", "%s", "bad notifications")

	// Message states against the fold, and notifications against versions.
	var wrong, versionGaps []string
	counts := map[domain.Status]int{}
	for k, evs := range byMsg {
		m, ok := got[k]
		if !ok {
			continue
		}
		want := ExpectedOf(evs)
		counts[want.Status]++
		if diff := compareMessage(want, m); diff != "" {
			wrong = append(wrong, k+": "+diff)
		}
		if d := checkVersions(m, statusChanged[k]); d != "" {
			versionGaps = append(versionGaps, k+": "+d)
		}
	}
	rep.ExpectedStatuses = map[string]int{}
	for s, n := range counts {
		name := string(s)
		if name == "" {
			name = "(none)"
		}
		rep.ExpectedStatuses[name] = n
	}
	v.add("message states", wrong, fmt.Sprintf("all %d messages match the precedence fold of their events (status, bounce type, opens, clicks, unsubscribed, history)", len(byMsg)),
		"messages whose state differs from the fold")
	v.add("status notifications", versionGaps, "each message's status_changed notifications carry versions 1..version once each, the highest with its final status",
		"messages whose status_changed notifications do not match their version")
	return nil
}

func compareMessage(want Expected, m apiMessage) string {
	var d []string
	if string(want.Status) != m.Status {
		d = append(d, fmt.Sprintf("status %q, want %q", m.Status, want.Status))
	}
	if want.BounceType != m.BounceType {
		d = append(d, fmt.Sprintf("bounce type %q, want %q", m.BounceType, want.BounceType))
	}
	if want.Opens != m.Opens || want.Clicks != m.Clicks {
		d = append(d, fmt.Sprintf("opens/clicks %d/%d, want %d/%d", m.Opens, m.Clicks, want.Opens, want.Clicks))
	}
	if want.Unsubscribed != m.Unsubscribed {
		d = append(d, fmt.Sprintf("unsubscribed %v, want %v", m.Unsubscribed, want.Unsubscribed))
	}
	seen := map[string]bool{}
	for _, e := range m.Events {
		if seen[e.EventID] {
			d = append(d, "event "+e.EventID+" twice in the history")
		}
		seen[e.EventID] = true
	}
	if len(seen) != want.History {
		d = append(d, fmt.Sprintf("%d events in the history, want %d", len(seen), want.History))
	}
	return strings.Join(d, "; ")
}

// checkVersions: every moved event notifies status_changed with the version it made, so a
// message at version V has notifications for versions 1..V, and version V names its status.
func checkVersions(m apiMessage, ns []Notification) string {
	byVersion := map[int64]Notification{}
	for _, n := range ns {
		if _, dup := byVersion[n.Version]; dup {
			return fmt.Sprintf("two notification ids for version %d", n.Version)
		}
		byVersion[n.Version] = n
	}
	if int64(len(ns)) != m.Version {
		return fmt.Sprintf("%d status_changed ids for version %d", len(ns), m.Version)
	}
	for v := int64(1); v <= m.Version; v++ {
		if _, ok := byVersion[v]; !ok {
			return fmt.Sprintf("no notification for version %d", v)
		}
	}
	if m.Version > 0 && byVersion[m.Version].Status != m.Status {
		return fmt.Sprintf("version %d notified %q, message is %q", m.Version, byVersion[m.Version].Status, m.Status)
	}
	return ""
}

// fetchMessages reads every message from mailhook's API, 8 at a time.
func (r *runner) fetchMessages(ctx context.Context, byMsg map[string][]*Event) (map[string]apiMessage, []string) {
	keys := make([]string, 0, len(byMsg))
	for k := range byMsg {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var (
		mu   sync.Mutex
		got  = map[string]apiMessage{}
		errs []string
		wg   sync.WaitGroup
		next = make(chan string)
	)
	for range 8 {
		wg.Go(func() {
			for k := range next {
				m, err := r.getMessage(ctx, k)
				mu.Lock()
				if err != nil {
					errs = append(errs, k+": "+err.Error())
				} else {
					got[k] = m
				}
				mu.Unlock()
			}
		})
	}
	for _, k := range keys {
		next <- k
	}
	close(next)
	wg.Wait()
	return got, errs
}

func (r *runner) getMessage(ctx context.Context, key string) (apiMessage, error) {
	prov, id, _ := strings.Cut(key, "/")
	u := strings.TrimRight(r.o.URL, "/") + "/v1/messages/" + url.PathEscape(prov) + "/" + url.PathEscape(id)
	var m apiMessage
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return m, err
		}
		req.Header.Set("Authorization", "Bearer "+r.o.Token)
		resp, err := r.client.Do(req)
		if err == nil {
			if resp.StatusCode == http.StatusOK {
				err = json.NewDecoder(resp.Body).Decode(&m)
				resp.Body.Close()
				return m, err
			}
			resp.Body.Close()
			err = fmt.Errorf("GET %s: %s", u, resp.Status)
			if resp.StatusCode == http.StatusUnauthorized {
				return m, fmt.Errorf("%w (check --token)", err)
			}
		}
		if attempt >= 3 {
			return m, err
		}
		time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
	}
}

// dupProbe re-sends already-processed Postscale events on an idle system and measures what a
// duplicate costs: latency, and the Temporal calls mailhook's client made for them. It sends
// DupProbe requests one at a time, then DupProbe with DupProbeConcurrency senders.
func (r *runner) dupProbe(ctx context.Context, v *verdict) []*ProbeReport {
	var out []*ProbeReport
	for _, c := range []int{1, r.o.DupProbeConcurrency} {
		if len(out) > 0 && c == 1 {
			break
		}
		if pr := r.probe(ctx, v, c); pr != nil {
			out = append(out, pr)
		}
	}
	return out
}

func (r *runner) probe(ctx context.Context, v *verdict, concurrency int) *ProbeReport {
	var events []*Event
	r.mu.Lock()
	for ev, s := range r.ev {
		if ev.Provider == Postscale && s.acked > 0 {
			events = append(events, ev)
		}
	}
	r.mu.Unlock()
	sort.Slice(events, func(i, j int) bool { return events[i].Index < events[j].Index })
	if len(events) == 0 {
		return nil
	}
	n := r.o.DupProbe
	pr := &ProbeReport{Requests: n, Concurrency: concurrency, LoadAvg: LoadAvg()}
	samplesBefore, err := scrapeMetrics(ctx, r.client, r.o.MetricsURL)
	if err != nil {
		pr.Error = err.Error()
	}
	before := temporalOps(samplesBefore)
	sinkBefore := r.sink.Stats()
	var (
		lat   []time.Duration
		mu    sync.Mutex
		codes Counter
		wg    sync.WaitGroup
		next  = make(chan *Event)
	)
	started := time.Now()
	for range concurrency {
		wg.Go(func() {
			for ev := range next {
				t := time.Now()
				code, ans, err := r.post(ctx, &Request{Provider: Postscale, Events: []*Event{ev}, Body: ev.Body})
				d := time.Since(t)
				codes.Inc(codeLabel(code, ans, err), 1)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		})
	}
	for i := range n {
		next <- events[i%len(events)]
	}
	close(next)
	wg.Wait()
	pr.Seconds = time.Since(started).Seconds()
	pr.Latency = Summarize(lat)
	pr.Codes = codes.Snapshot()
	// The SDK's metrics reach the Prometheus registry once a second.
	time.Sleep(2500 * time.Millisecond)
	if samplesBefore != nil {
		if samplesAfter, err := scrapeMetrics(ctx, r.client, r.o.MetricsURL); err == nil {
			pr.ServerLatency = serverLatency(samplesBefore, samplesAfter)
			pr.TemporalOps = diffOps(before, temporalOps(samplesAfter))
			pr.StartsPerDuplicate = pr.TemporalOps["StartWorkflowExecution"] / float64(n)
			calls := 0.0
			for op, d := range pr.TemporalOps {
				if !workerOp(op) {
					calls += d
				}
			}
			pr.ClientCallsPerDuplicate = calls / float64(n)
		} else {
			pr.Error = err.Error()
		}
	}
	sinkAfter := r.sink.Stats()
	var bad []string
	if pr.Codes["200 duplicate"] != n {
		bad = append(bad, fmt.Sprintf("answers %v, want %d × 200 duplicate", pr.Codes, n))
	}
	if sinkAfter.Deliveries != sinkBefore.Deliveries {
		bad = append(bad, fmt.Sprintf("the sink got %d notifications during the probe", sinkAfter.Deliveries-sinkBefore.Deliveries))
	}
	v.add(fmt.Sprintf("duplicate probe ×%d", concurrency), bad, fmt.Sprintf("%d re-sent processed events: all 200 duplicate, no notification", n), "duplicate probe problems")
	return pr
}

// workerOp reports whether a Temporal gRPC operation is the worker's (polling and completing
// tasks) rather than the HTTP handler's client calls.
func workerOp(op string) bool {
	for _, p := range []string{"Poll", "RespondWorkflowTask", "RespondActivityTask", "RecordActivityTask", "ShutdownWorker", "RespondQueryTask", "RespondNexusTask"} {
		if strings.HasPrefix(op, p) {
			return true
		}
	}
	return false
}

// promSample is one line of a Prometheus text exposition.
type promSample struct {
	name, labels string
	value        float64
}

// scrapeMetrics reads mailhook's /metrics.
func scrapeMetrics(ctx context.Context, c *http.Client, metricsURL string) ([]promSample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", metricsURL, resp.Status)
	}
	return parseExposition(bufio.NewScanner(resp.Body))
}

func parseExposition(sc *bufio.Scanner) ([]promSample, error) {
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var out []promSample
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		var s promSample
		rest := line
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			if j < i {
				continue
			}
			s.name, s.labels, rest = line[:i], line[i+1:j], line[j+1:]
		} else {
			name, r, ok := strings.Cut(line, " ")
			if !ok {
				continue
			}
			s.name, rest = name, r
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		s.value = v
		out = append(out, s)
	}
	return out, sc.Err()
}

// scrapeTemporalOps sums the Temporal SDK's temporal_request counter by operation from
// mailhook's /metrics.
func scrapeTemporalOps(ctx context.Context, c *http.Client, metricsURL string) (map[string]float64, error) {
	samples, err := scrapeMetrics(ctx, c, metricsURL)
	if err != nil {
		return nil, err
	}
	return temporalOps(samples), nil
}

// scrapeTemporalOpsAll adds up the Temporal calls of several processes (an HTTP process and its
// workers); any one that does not answer fails it, so a count is never silently partial.
func scrapeTemporalOpsAll(ctx context.Context, c *http.Client, metricsURLs []string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, u := range metricsURLs {
		ops, err := scrapeTemporalOps(ctx, c, u)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", u, err)
		}
		for op, n := range ops {
			out[op] += n
		}
	}
	return out, nil
}

func temporalOps(samples []promSample) map[string]float64 {
	out := map[string]float64{}
	for _, s := range samples {
		if s.name != "temporal_request" && s.name != "temporal_request_total" {
			continue
		}
		if op := labelValue(s.labels, "operation"); op != "" {
			out[op] += s.value
		}
	}
	return out
}

// meanBy is the mean of a summary or histogram between two scrapes (Δsum/Δcount), by the
// value of label by, over the series that keep says to.
func meanBy(before, after []promSample, base, by string, keep func(labels string) bool) map[string]time.Duration {
	type acc struct{ sum, count float64 }
	tally := func(samples []promSample) map[string]*acc {
		m := map[string]*acc{}
		for _, s := range samples {
			isSum, isCount := s.name == base+"_sum", s.name == base+"_count"
			if (!isSum && !isCount) || (keep != nil && !keep(s.labels)) {
				continue
			}
			k := labelValue(s.labels, by)
			if m[k] == nil {
				m[k] = &acc{}
			}
			if isSum {
				m[k].sum += s.value
			} else {
				m[k].count += s.value
			}
		}
		return m
	}
	b, a := tally(before), tally(after)
	out := map[string]time.Duration{}
	for k, v := range a {
		sum, count := v.sum, v.count
		if p := b[k]; p != nil {
			sum, count = sum-p.sum, count-p.count
		}
		if count > 0 {
			out[k] = time.Duration(sum / count * float64(time.Second))
		}
	}
	return out
}

func diffOps(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// labelValue returns the value of label name in a Prometheus label list (a="x",b="y").
func labelValue(labels, name string) string {
	key := name + `="`
	for off := 0; off < len(labels); {
		i := strings.Index(labels[off:], key)
		if i < 0 {
			return ""
		}
		i += off
		if i == 0 || labels[i-1] == ',' {
			v := labels[i+len(key):]
			if j := strings.IndexByte(v, '"'); j >= 0 {
				return v[:j]
			}
			return ""
		}
		off = i + len(key)
	}
	return ""
}
