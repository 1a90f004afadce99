package rejected

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/store"
)

var ten = time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)

// queued takes what the recorder queued for its writer.
func queued(r *Recorder) []store.RejectedRequest {
	var out []store.RejectedRequest
	r.drain(&out)
	return out
}

// dropped sums what the ledger counted as dropped since the last collect, by "endpoint@hour".
func dropped(r *Recorder) map[string]int64 {
	out := map[string]int64{}
	for _, d := range r.ledger.collect() {
		out[d.Endpoint+"@"+d.Hour.Format("15:04")] += d.Dropped
	}
	return out
}

func row() store.RejectedRequest {
	return store.RejectedRequest{Provider: "postscale", Cause: string(BadSignature), Status: 401,
		Header: map[string][]string{"Authorization": {"Bearer x"}, "Postscale-Signature": {"v1,abc"}}}
}

func TestHourOfIsTheHoursStart(t *testing.T) {
	for _, at := range []time.Time{ten, ten.Add(59*time.Minute + 59*time.Second), ten.Add(time.Hour - time.Nanosecond),
		time.Date(1969, 12, 31, 23, 30, 0, 0, time.UTC), ten.In(time.FixedZone("x", 5*3600+1800))} {
		if got, want := hourOf(at), at.Truncate(time.Hour).Unix(); got != want {
			t.Errorf("hourOf(%v) = %d, want %d", at, got, want)
		}
	}
}

// Past the budget a refusal is counted and nothing else: the row is not built, and nothing is
// allocated; with recording off, not even counted.
func TestARefusalPastTheBudgetCostsACounter(t *testing.T) {
	r := &Recorder{Budget: Budget{RowsPerHour: 2, BytesPerHour: 1 << 20, MaxBodyBytes: 1 << 10}}
	body := []byte(`{"id":"ev_1"}`)
	built := 0
	build := func() store.RejectedRequest { built++; return row() }
	for range 2 {
		if !r.Record("ps", ten, body, build) {
			t.Fatal("a refusal within the budget was not kept")
		}
	}
	if r.Record("ps", ten.Add(time.Minute), body, build) {
		t.Fatal("a refusal past the budget was kept")
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if r.Record("ps", ten.Add(time.Minute), body, build) {
			t.Fatal("kept past the budget")
		}
	})
	if allocs != 0 {
		t.Errorf("a refusal past the budget allocates %.1f times, want 0", allocs)
	}
	if built != 2 {
		t.Errorf("the row was built %d times, want 2 (only for the ones kept)", built)
	}
	if got := dropped(r); got["ps@10:00"] != 1002 { // AllocsPerRun runs it once more, to warm up
		t.Errorf("dropped %v, want ps@10:00: 1002", got)
	}
	if q := queued(r); len(q) != 2 {
		t.Errorf("%d queued, want 2", len(q))
	}

	off := &Recorder{Off: true}
	allocs = testing.AllocsPerRun(1000, func() {
		if off.Record("ps", ten, body, build) {
			t.Fatal("kept while off")
		}
	})
	if allocs != 0 || built != 2 {
		t.Errorf("with recording off: %.1f allocations, row built %d times; want 0 and 2", allocs, built)
	}
}

// What is kept is the row as built, with the body copied and cut, and the headers that may hold
// a credential left out.
func TestAKeptRefusalIsCopiedCutAndFiltered(t *testing.T) {
	r := &Recorder{Budget: Budget{RowsPerHour: 10, BytesPerHour: 1 << 20, MaxBodyBytes: 8}}
	body := []byte("0123456789")
	r.Record("ps", ten, body, row)
	r.Record("ps", ten, nil, row)
	body[0] = 'X' // the caller's lease, reused
	q := queued(r)
	if len(q) != 2 {
		t.Fatalf("%d queued, want 2", len(q))
	}
	if k := q[0]; string(k.Body) != "01234567" || !k.BodyTruncated || k.Endpoint != "ps" || !k.ReceivedAt.Equal(ten) ||
		k.Cause != "bad_signature" || k.Header["Authorization"] != nil || k.Header["Postscale-Signature"] == nil {
		t.Errorf("kept %+v, want the body cut to 8 bytes and copied, the endpoint, time and cause, no Authorization", k)
	}
	if k := q[1]; k.Body != nil || k.BodyTruncated {
		t.Errorf("refused unread: body %q truncated %v, want none", k.Body, k.BodyTruncated)
	}
}

// The byte budget counts each body as cut plus a row's overhead: a body that does not fit is
// dropped while a smaller one still fits, and once not even an empty row fits the endpoint is
// spent for the hour.
func TestTheByteBudget(t *testing.T) {
	r := &Recorder{Budget: Budget{RowsPerHour: 100, BytesPerHour: 3*rowOverhead + 250, MaxBodyBytes: 100}}
	big := make([]byte, 200) // cut to 100: costs 612
	for i, want := range []bool{true, true, false, true, false} {
		b := big
		if i == 3 {
			b = nil // 512 fits in the 1,786 - 1,224 left
		}
		if got := r.Record("ps", ten, b, row); got != want {
			t.Errorf("refusal %d: kept %v, want %v", i, got, want)
		}
	}
	a := (*r.ledger.accounts.Load())["ps"]
	if w := a.cur.Load(); w.bytes != 2*(rowOverhead+100)+rowOverhead || !w.full.Load() {
		t.Errorf("spent %d bytes, full %v; want %d and full", w.bytes, w.full.Load(), 2*(rowOverhead+100)+rowOverhead)
	}
	if got := dropped(r); got["ps@10:00"] != 2 {
		t.Errorf("dropped %v, want 2", got)
	}
}

// Each endpoint has its own budget per hour; a new hour has a fresh one; a refusal recorded after
// its hour ended for its endpoint is counted as dropped in its own hour, and never kept.
func TestEveryEndpointAndHourHasItsBudget(t *testing.T) {
	r := &Recorder{Budget: Budget{RowsPerHour: 1, BytesPerHour: 1 << 20, MaxBodyBytes: 64}}
	got := []bool{
		r.Record("ps", ten, nil, row),
		r.Record("ps", ten.Add(time.Minute), nil, row),
		r.Record("sg", ten.Add(time.Minute), nil, row),
		r.Record("ps", ten.Add(time.Hour), nil, row),
		r.Record("ps", ten.Add(59*time.Minute), nil, row), // late: 10:00's budget is closed
		r.Record("ps", ten.Add(time.Hour+time.Minute), nil, row),
		r.Record("unknown", ten.Add(time.Hour), nil, row),
	}
	if want := []bool{true, false, true, true, false, false, true}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("kept %v, want %v", got, want)
	}
	if d, want := dropped(r), map[string]int64{"ps@10:00": 2, "ps@11:00": 1}; fmt.Sprint(d) != fmt.Sprint(want) {
		t.Errorf("dropped %v, want %v", d, want)
	}
	if d := dropped(r); len(d) != 0 {
		t.Errorf("collected twice: %v, want nothing the second time", d)
	}
}

// A drop counted into an hour's window just after the hour turned is still collected, and the
// windows of hours long gone are forgotten.
func TestADropCountedLateIntoAnOldWindowIsCollected(t *testing.T) {
	r := &Recorder{Budget: Budget{RowsPerHour: 0, BytesPerHour: 1 << 20, MaxBodyBytes: 64}}
	r.Record("ps", ten, nil, row)
	a := (*r.ledger.accounts.Load())["ps"]
	w10 := a.cur.Load()
	r.Record("ps", ten.Add(time.Hour), nil, row)
	w10.dropped.Add(1) // a refusal that read 10:00's window before 11:00's replaced it
	if d := dropped(r); d["ps@10:00"] != 2 || d["ps@11:00"] != 1 {
		t.Errorf("dropped %v, want ps@10:00: 2, ps@11:00: 1", d)
	}
	for h := 2; h <= 5; h++ {
		r.Record("ps", ten.Add(time.Duration(h)*time.Hour), nil, row)
		r.ledger.collect()
	}
	if len(a.old) != 2 {
		t.Errorf("%d old windows kept, want the two hours before the current one", len(a.old))
	}
}

// With the writer's queue full, a refusal within the budget is dropped and its reservation given
// back: the budget counts only what was queued.
func TestAFullQueueGivesTheReservationBack(t *testing.T) {
	r := &Recorder{Budget: Budget{RowsPerHour: queueSize + 10, BytesPerHour: 1 << 30, MaxBodyBytes: 64}}
	kept := 0
	for range queueSize + 5 {
		if r.Record("ps", ten, []byte("{}"), row) {
			kept++
		}
	}
	a := (*r.ledger.accounts.Load())["ps"]
	if w := a.cur.Load(); kept != queueSize || w.rows != queueSize || w.bytes != int64(queueSize)*cost(2) || w.full.Load() {
		t.Errorf("kept %d, spent %d rows %d bytes, full %v; want %d kept and spent, not full", kept, w.rows, w.bytes, w.full.Load(), queueSize)
	}
	if d := dropped(r); d["ps@10:00"] != 5 {
		t.Errorf("dropped %v, want 5", d)
	}
	queued(r)
	if !r.Record("ps", ten, nil, row) {
		t.Error("with the queue drained and budget left, a refusal was not kept")
	}
}

// Concurrent refusals keep exactly the budget and count every other one, once: what the table
// misses is what is counted.
func TestConcurrentRefusalsAreCountedOnce(t *testing.T) {
	const budget, senders, each = 50, 8, 500
	r := &Recorder{Budget: Budget{RowsPerHour: budget, BytesPerHour: 1 << 30, MaxBodyBytes: 64}}
	r.init() // as Run does before its first collect
	var wg sync.WaitGroup
	var total int64
	var mu sync.Mutex
	stop := make(chan struct{})
	collector := make(chan struct{})
	go func() { // the writer collecting while refusals are counted
		defer close(collector)
		for {
			for _, d := range r.ledger.collect() {
				mu.Lock()
				total += d.Dropped
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	for range senders {
		wg.Go(func() {
			for i := range each {
				r.Record("ps", ten.Add(time.Duration(i)*time.Millisecond), nil, row)
			}
		})
	}
	wg.Wait()
	close(stop)
	<-collector
	for _, d := range r.ledger.collect() {
		total += d.Dropped
	}
	if kept := len(queued(r)); kept != budget || total != senders*each-budget {
		t.Errorf("kept %d, counted %d as dropped; want %d and %d", kept, total, budget, senders*each-budget)
	}
}

// BenchmarkRecord is the recorder alone, without HTTP: a refusal past its endpoint's budget (a
// flood's steady state), one with recording off, and one within the budget (copied and queued;
// the queue drained in the loop). Compare ns/op and allocs/op.
//
//	go test -run '^$' -bench 'BenchmarkRecord$' ./internal/rejected
func BenchmarkRecord(b *testing.B) {
	body := make([]byte, 600)
	for _, name := range []string{"past-the-budget", "off", "kept"} {
		b.Run(name, func(b *testing.B) {
			r := &Recorder{Budget: Budget{RowsPerHour: 0, BytesPerHour: 1 << 50, MaxBodyBytes: 64 << 10}, Off: name == "off"}
			if name == "kept" {
				r.Budget.RowsPerHour = 1 << 30
			}
			b.ReportAllocs()
			for b.Loop() {
				if r.Record("ps", ten, body, row) && len(r.queue) == queueSize {
					queued(r)
				}
			}
		})
	}
}
