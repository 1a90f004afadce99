package activities

import (
	"context"
	"sync"
	"time"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/notify"
)

// PreparedMaxAge is how long a notification Process wrote waits in its worker for its first
// attempt to take it. That attempt sends it on the gate (the sink's circuit state and pause)
// Process read with it, so this bounds how stale that read may be; an attempt coming later,
// or on another worker, reads the row and the gate again (EnsureNotification), as a retry does.
// The first attempts are local activities of the workflow task that ran Process, so they
// normally take their notifications within milliseconds.
const PreparedMaxAge = 2 * time.Second

// preparedLimit bounds the notifications waiting in one worker: past it, Process writes them
// and keeps none, and their first attempts read them back.
const preparedLimit = 10_000

// preparedNotifications holds the notifications Process wrote, with what their bodies were
// built from, for their first attempts in the same worker: those then need neither the event's
// read (StoredEvent) nor the row's write and read-back (EnsureNotification).
type preparedNotifications struct {
	mu    sync.Mutex
	m     map[string]prepared
	swept time.Time
}

type prepared struct {
	n     delivery.Notification
	ev    domain.Event
	apply domain.ApplyResult
	at    time.Time
}

// keep holds ns, the notifications Process wrote for ev (outcome apply), from now.
func (p *preparedNotifications) keep(ns []delivery.Notification, ev domain.Event, apply domain.ApplyResult, now time.Time) {
	if len(ns) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]prepared{}
	}
	// Those no attempt took (their run's workflow task went on elsewhere) go at the next keep
	// after they expired: the map holds about PreparedMaxAge's worth, bodies included.
	if d := now.Sub(p.swept); d < 0 || d > PreparedMaxAge || len(p.m)+len(ns) > preparedLimit {
		for id, x := range p.m {
			if d := now.Sub(x.at); d < 0 || d > PreparedMaxAge {
				delete(p.m, id)
			}
		}
		p.swept = now
	}
	for _, n := range ns {
		if len(p.m) >= preparedLimit {
			return
		}
		p.m[n.ID] = prepared{n: n, ev: ev, apply: apply, at: now}
	}
}

// take removes notification id and returns it when it was kept less than PreparedMaxAge ago.
func (p *preparedNotifications) take(id string, now time.Time) (prepared, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	x, ok := p.m[id]
	if !ok {
		return prepared{}, false
	}
	delete(p.m, id)
	if d := now.Sub(x.at); d < 0 || d > PreparedMaxAge {
		return prepared{}, false
	}
	return x, true
}

// prepare renders the notifications routing asks for of ev's outcome, for Process to write
// (store.Prepare): the rows and bodies the first attempts would write (deliver), for the sinks
// still configured. The workflow sends the same list (domain.Notifications of Process's output).
func (a *Activities) prepare(routing domain.Routing) func(domain.Event, domain.ApplyResult, bool) []delivery.Notification {
	return func(ev domain.Event, res domain.ApplyResult, applied bool) []delivery.Notification {
		var outcome domain.Outcome
		if applied {
			outcome = res.Outcome
		}
		var out []delivery.Notification
		for _, x := range domain.Notifications(routing, ev.Kind, outcome, applied && res.Suppressed) {
			sink, ok := findSink(a.Sinks, x.Sink)
			if !ok {
				continue
			}
			if row, ok := a.render(ev, res, sink, x.Type, ev.EventID); ok {
				out = append(out, row)
			}
		}
		return out
	}
}

// render is the row of ev's notification of type typ to sink, keyed by keyID, with its body;
// ok false when the body cannot be built (its first attempt reports why).
func (a *Activities) render(ev domain.Event, res domain.ApplyResult, sink config.Sink, typ, keyID string) (delivery.Notification, bool) {
	id := domain.NotificationID(ev.Provider, keyID, sink.Name, typ)
	body, err := notify.Body(id, notify.Input{Type: typ, Event: ev, Applied: appliedOf(res),
		SuppressionScopes: a.SuppressionScopes, EngagementIP: sink.EngagementIP}, a.now())
	if err != nil {
		return delivery.Notification{}, false
	}
	row := delivery.Notification{ID: id, Provider: ev.Provider, EventID: keyID, Sink: sink.Name, Type: typ, Body: body}
	if typ == domain.TypeStatusChanged {
		row.MessageID, row.Version = ev.MessageID, res.Version
	}
	return row, true
}

// unmarkedNotifications are the notifications first attempts in this worker delivered and left
// for their run's MarkProcessed to mark sent, in the statement that marks the event processed
// (one statement fewer per notification). That step normally comes in the same workflow task,
// milliseconds later, in this worker. When it does not (a sibling notification's attempts went on
// as a regular activity, so the run ends in a later task; or its task failed and ran again
// elsewhere), the worker marks them itself once they have waited PreparedMaxAge (markOverdue,
// on a timer armed while any waits): a delivered notification does not stay pending for as long
// as its run's retries take. The run's MarkProcessed marks them too (marking again changes
// nothing), so one the worker could not mark is marked when its run ends.
type unmarkedNotifications struct {
	mu    sync.Mutex
	m     map[string]time.Time
	armed bool
}

// add records that notification id was delivered at now; arm reports that no look at the
// waiting ones is scheduled, and that the caller schedules one.
func (u *unmarkedNotifications) add(id string, now time.Time) (arm bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil {
		u.m = map[string]time.Time{}
	}
	u.m[id] = now
	arm, u.armed = !u.armed, true
	return arm
}

// marked forgets ids: their run's MarkProcessed marked them.
func (u *unmarkedNotifications) marked(ids []string) {
	if len(ids) == 0 {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, id := range ids {
		delete(u.m, id)
	}
}

// overdue removes and returns the ids that have waited longer than PreparedMaxAge, and reports
// whether others still wait (the caller looks again later) or none (the next add arms a look).
func (u *unmarkedNotifications) overdue(now time.Time) (ids []string, waiting bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for id, at := range u.m {
		if d := now.Sub(at); d < 0 || d > PreparedMaxAge {
			ids = append(ids, id)
			delete(u.m, id)
		}
	}
	u.armed = len(u.m) > 0
	return ids, u.armed
}

// leaveUnmarked records delivered notification id for its run's MarkProcessed, and makes sure a
// look at the waiting ones is scheduled.
func (a *Activities) leaveUnmarked(id string) {
	if a.unmarked.add(id, a.now()) {
		a.lookAtUnmarked()
	}
}

// lookAtUnmarked marks sent, a little after PreparedMaxAge, the delivered notifications whose
// run's MarkProcessed has not marked them, and looks again while others wait. One that cannot be
// marked now is left to its run's MarkProcessed.
func (a *Activities) lookAtUnmarked() {
	time.AfterFunc(PreparedMaxAge+PreparedMaxAge/4, func() {
		ids, waiting := a.unmarked.overdue(a.now())
		if len(ids) > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := a.Notifications.MarkNotificationsSent(ctx, ids); err != nil {
				a.log().WarnContext(ctx, "could not mark delivered notifications sent; their runs' MarkProcessed marks them", "count", len(ids), "error", err)
			}
			cancel()
		}
		if waiting {
			a.lookAtUnmarked()
		}
	})
}
