package backfill_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/backfill"
	"github.com/mailhook/mailhook/internal/providercounts"
)

const postmarkToken = "server-token-SECRET"

// postmarkServer is Postmark's Bounce API as documented: GET /bounces?count=&offset=
// &fromdate=&todate=[&messagestream=] with X-Postmark-Server-Token; fromdate and todate are
// inclusive, US Eastern wall time to the second; count is at most 500 and count+offset at most
// 10,000 (422 otherwise); the answer is {"TotalCount":N,"Bounces":[…]}, newest first. Its items
// carry no RecordType, as the API's do.
type postmarkServer struct {
	*httptest.Server
	at []time.Time // bounce i (ID i+1) bounced at at[i]

	mu       sync.Mutex
	requests int
	refused  int
	streams  map[string]int
}

func newPostmarkServer(t *testing.T, at []time.Time) *postmarkServer {
	s := &postmarkServer{at: at, streams: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *postmarkServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests++
	s.streams[r.URL.Query().Get("messagestream")]++
	s.mu.Unlock()
	if r.URL.Path != "/bounces" {
		http.NotFound(w, r)
		return
	}
	if r.Header.Get("X-Postmark-Server-Token") != postmarkToken {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"ErrorCode":10,"Message":"No Account or Server API tokens were supplied in the HTTP headers."}`))
		return
	}
	q := r.URL.Query()
	count, err1 := strconv.Atoi(q.Get("count"))
	offset, err2 := strconv.Atoi(q.Get("offset"))
	et, _ := time.LoadLocation("America/New_York")
	from, err3 := time.ParseInLocation("2006-01-02T15:04:05", q.Get("fromdate"), et)
	to, err4 := time.ParseInLocation("2006-01-02T15:04:05", q.Get("todate"), et)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || count > 500 || count+offset > 10000 {
		s.mu.Lock()
		s.refused++
		s.mu.Unlock()
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = w.Write([]byte(`{"ErrorCode":605,"Message":"The value of count + offset cannot exceed 10000."}`))
		return
	}
	var in []int
	for i, at := range s.at {
		if !at.Before(from) && at.Before(to.Add(time.Second)) { // todate's whole second is in
			in = append(in, i)
		}
	}
	sort.Slice(in, func(a, b int) bool { return s.at[in[a]].After(s.at[in[b]]) })
	page := []map[string]any{}
	for _, i := range in[min(offset, len(in)):min(offset+count, len(in))] {
		page = append(page, map[string]any{
			"ID": i + 1, "Type": "HardBounce", "TypeCode": 1, "Name": "Hard bounce", "Tag": "",
			"MessageID": fmt.Sprintf("00000000-0000-0000-0000-%012d", i), "ServerID": 23, "MessageStream": "outbound",
			"Description": "The server was unable to deliver your message.", "Details": "smtp;550 5.1.1 unknown user",
			"Email": fmt.Sprintf("user%d@example.com", i), "From": "sender@example.com",
			"BouncedAt": s.at[i].In(et).Format("2006-01-02T15:04:05.0000000-07:00"), "DumpAvailable": false,
			"Inactive": true, "CanActivate": true, "Subject": "Hello",
		})
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"TotalCount": len(in), "Bounces": page})
}

// A window with more bounces than offsets reach (10,000) is split until each part is
// reachable: every bounce is accepted once, no request is refused, and the boundaries' overlaps
// are duplicates. A window across the November daylight-saving change is listed whole.
func TestPostmarkBackfillSplitsWindowsOverTheOffsetCap(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	// 10,600 bounces over a day that includes 2026-11-01 01:00-02:00 EST/EDT twice.
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	at := make([]time.Time, 10600)
	for i := range at {
		at[i] = day.Add(time.Duration(i) * 8 * time.Second).Add(123 * time.Millisecond)
	}
	srv := newPostmarkServer(t, at)
	e := newEnv(t)
	job := e.job(t, "postmark", providercounts.Settings{BaseURL: srv.URL, ServerToken: postmarkToken, Rate: 1000})
	job.Since, job.Until = day, day.Add(25*time.Hour)
	p, err := backfill.Run(t.Context(), job)
	require.NoError(t, err)
	assert.Zero(t, srv.refused, "no request over the offset cap")
	assert.True(t, p.Finished)
	assert.Equal(t, int64(len(at)), p.Accepted, "every bounce, once")
	assert.Equal(t, p.Fetched, p.Accepted+p.Duplicates)
	assert.Equal(t, len(at), rows(t, e.dbURL, "postmark"))
	assert.Equal(t, srv.requests, srv.streams[""], "no stream configured: none asked for")
	got, err := e.st.Replays.RecordedEvent(t.Context(), "postmark", "bounce:1")
	require.NoError(t, err)
	assert.Equal(t, "backfill", got.Event.Source)
	assert.Equal(t, "Bounce:HardBounce", got.Event.Type)
	assert.NotContains(t, e.log.String(), "@example.com")
}

// The configured stream is the one listed, and a refused token stops the run.
func TestPostmarkBackfillStreamAndToken(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	srv := newPostmarkServer(t, []time.Time{since.Add(time.Hour), since.Add(2 * time.Hour)})
	e := newEnv(t)
	job := e.job(t, "postmark", providercounts.Settings{BaseURL: srv.URL, ServerToken: postmarkToken, MessageStream: "outbound", Rate: 100})
	p, err := backfill.Run(t.Context(), job)
	require.NoError(t, err)
	assert.Equal(t, backfill.Progress{Pages: 1, Fetched: 2, Accepted: 2, Finished: true}, p)
	assert.Equal(t, 1, srv.streams["outbound"])

	job.Endpoint = "other"
	job.Settings.ServerToken = "wrong"
	_, err = backfill.Run(t.Context(), job)
	require.ErrorIs(t, err, backfill.ErrUnauthorized)
	assert.NotContains(t, err.Error(), "No Account")
}
