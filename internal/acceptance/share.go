package acceptance

import "github.com/mailhook/mailhook/internal/domain"

// shareRaw makes the events of one request that carry the same raw body (an adapter derived them
// from one body: SES's notification naming several recipients gives each the whole SNS envelope)
// keep it once: the first of them whose verdict is not yet given (ok) keeps its Raw, and each
// other drops it and names that one in RawOf. So the body is stored once, not once per event
// (a 270 KB notification naming 1,000 recipients was 270 MB of jsonb), and a run accepted through
// Temporal carries its own event, not the envelope. Bodies are the same when they are the same
// bytes in memory, as a derived event's are: two elements of a batch, each with its own Raw, are
// never merged, whatever they hold. An inbound email keeps its body: its notification carries it.
func shareRaw(evs []domain.Event, ok func(i int) bool) {
	type body struct {
		data *byte
		n    int
	}
	holders := map[body]int{}
	for i := range evs {
		ev := &evs[i]
		if len(ev.Raw) == 0 || ev.Kind == domain.KindInbound || !ok(i) {
			continue
		}
		b := body{&ev.Raw[0], len(ev.Raw)}
		h, seen := holders[b]
		if !seen {
			holders[b] = i
			continue
		}
		if evs[h].Provider != ev.Provider {
			continue
		}
		ev.Raw, ev.RawOf = nil, evs[h].EventID
	}
}
