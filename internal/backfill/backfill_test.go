package backfill_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/acceptance"
	"github.com/mailhook/mailhook/internal/backfill"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/providercounts"
	"github.com/mailhook/mailhook/internal/serve"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

// The window every Mailgun test lists; its events are in it.
var (
	since = time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	until = since.Add(24 * time.Hour)
)

const mailgunKey = "key-0123456789abcdef-SECRET"

// mailgunServer is Mailgun's Events API as documented: GET /v3/{domain}/events with Basic auth
// api:KEY answers {"items":[…],"paging":{"next":URL,…}}, and following next ends with a page of
// no items. It pages perPage events at a time (Mailgun's limit is 300; a small page gives many
// pages), counts the requests per page, and answers the status fail gives for a request.
type mailgunServer struct {
	*httptest.Server
	events  []string // event-data objects, in ascending order
	perPage int

	mu    sync.Mutex
	hits  map[int]int // page index → requests
	times []time.Time
	fail  func(page, hit int) (status int, header http.Header)
}

func newMailgunServer(t *testing.T, n, perPage int) *mailgunServer {
	s := &mailgunServer{perPage: perPage, hits: map[int]int{}}
	for i := range n {
		at := since.Add(time.Duration(i+1) * time.Minute)
		s.events = append(s.events, fmt.Sprintf(`{"id":"ev-%03d","event":"delivered","timestamp":%d.25,"recipient":"user%d@example.com",`+
			`"message":{"headers":{"message-id":"msg-%03d@mg.example.com"}},"delivery-status":{"code":250,"message":"OK"}}`, i, at.Unix(), i, i))
	}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *mailgunServer) serve(w http.ResponseWriter, r *http.Request) {
	page := 0
	switch {
	case r.URL.Path == "/v3/mg.example.com/events":
		q := r.URL.Query()
		if q.Get("ascending") != "yes" || q.Get("limit") != "300" || q.Get("begin") != strconv.FormatInt(since.Unix(), 10) ||
			q.Get("end") != strconv.FormatInt(until.Unix(), 10) {
			http.Error(w, "bad query "+r.URL.RawQuery, http.StatusBadRequest)
			return
		}
	case strings.HasPrefix(r.URL.Path, "/v3/mg.example.com/events/p"):
		page, _ = strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/v3/mg.example.com/events/p"))
	default:
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	s.hits[page]++
	hit := s.hits[page]
	s.times = append(s.times, time.Now())
	fail := s.fail
	s.mu.Unlock()
	if user, pass, ok := r.BasicAuth(); !ok || user != "api" || pass != mailgunKey {
		http.Error(w, `{"message":"Invalid private key"}`, http.StatusUnauthorized)
		return
	}
	if fail != nil {
		if status, h := fail(page, hit); status != 0 {
			for k, v := range h {
				w.Header()[k] = v
			}
			w.WriteHeader(status)
			_, _ = fmt.Fprintf(w, `{"message":"Forbidden: the key %s may not read events"}`, mailgunKey)
			return
		}
	}
	lo := min(page*s.perPage, len(s.events))
	hi := min(lo+s.perPage, len(s.events))
	next := fmt.Sprintf("http://%s/v3/mg.example.com/events/p%d", r.Host, page+1)
	fmt.Fprintf(w, `{"items":[%s],"paging":{"next":%q,"previous":"http://%s/v3/mg.example.com/events/prev","first":"","last":""}}`,
		strings.Join(s.events[lo:hi], ","), next, r.Host)
}

func (s *mailgunServer) hitsOf(page int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[page]
}

func (s *mailgunServer) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.times)
}

type env struct {
	st       *store.Store
	acceptor *acceptance.Acceptor
	dbURL    string
	log      *bytes.Buffer
}

func newEnv(t *testing.T) env {
	dbURL := storetest.NewDatabase(t)
	st := storetest.OpenURL(t, dbURL, store.Options{})
	buf := &bytes.Buffer{}
	return env{st: st, acceptor: acceptance.NewAcceptor(st.Inbox, nil), dbURL: dbURL, log: buf}
}

func (e env) job(t *testing.T, prov string, s providercounts.Settings) backfill.Job {
	return backfill.Job{Endpoint: prov, Provider: prov, Settings: s, Since: since, Until: until,
		Parser: adapter(t, prov), Acceptor: serve.BackfillAcceptor(e.acceptor), Progress: serve.BackfillProgress(e.st),
		Log: slog.New(slog.NewTextHandler(&lockedWriter{w: e.log}, nil))}
}

func mailgunSettings(srv *mailgunServer, perSecond float64) providercounts.Settings {
	return providercounts.Settings{BaseURL: srv.URL, APIKey: mailgunKey, Domain: "mg.example.com", Rate: perSecond}
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func rows(t *testing.T, dbURL, prov string) int {
	var n int
	require.NoError(t, storetest.NewPool(t, dbURL).QueryRow(t.Context(),
		`SELECT count(*) FROM webhook_events WHERE provider = $1`, prov).Scan(&n))
	return n
}

// A backfill takes every listed event in once: the one whose webhook arrived is a duplicate
// (and keeps its webhook's record), the others are accepted as backfilled; a second run of the
// finished window fetches nothing, and --restart lists it again, all duplicates.
func TestMailgunBackfillAcceptsEachEventOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	srv := newMailgunServer(t, 10, 3)
	e := newEnv(t)
	// ev-004 arrived as a webhook before: the same event-data with its signature block.
	webhook := parseOne(t, adapter(t, "mailgun"), []byte(`{"signature":{"timestamp":"1","token":"t","signature":"s"},"event-data":`+srv.events[4]+`}`))
	v, err := e.acceptor.Accept(t.Context(), []domain.Event{webhook})
	require.NoError(t, err)
	require.Equal(t, acceptance.Accepted, v[0].Status)

	var beats []backfill.Progress
	job := e.job(t, "mailgun", mailgunSettings(srv, 100))
	job.OnPage = func(p backfill.Progress) { beats = append(beats, p) }
	p, err := backfill.Run(t.Context(), job)
	require.NoError(t, err)
	assert.Equal(t, backfill.Progress{Pages: 5, Fetched: 10, Accepted: 9, Duplicates: 1, Finished: true}, p,
		"four pages of events and the empty page that ends the listing")
	assert.Len(t, beats, 5, "OnPage after each page")
	assert.Equal(t, 10, rows(t, e.dbURL, "mailgun"), "one row per event")

	got, err := e.st.Replays.RecordedEvent(t.Context(), "mailgun", webhook.EventID)
	require.NoError(t, err)
	assert.Empty(t, got.Event.Source, "the webhook's event stays the webhook's")
	got, err = e.st.Replays.RecordedEvent(t.Context(), "mailgun", "ev-000:2026-11-29")
	require.NoError(t, err)
	require.NotNil(t, got.Event)
	assert.Equal(t, domain.SourceBackfill, got.Event.Source, "the stored event, as processing reads it")
	assert.Equal(t, "msg-000@mg.example.com", got.Event.MessageID)

	before := srv.requests()
	p, err = backfill.Run(t.Context(), job)
	require.NoError(t, err)
	assert.True(t, p.Finished && p.Resumed)
	assert.Equal(t, before, srv.requests(), "a finished window is not fetched again")

	job.Restart = true
	p, err = backfill.Run(t.Context(), job)
	require.NoError(t, err)
	assert.Equal(t, backfill.Progress{Pages: 5, Fetched: 10, Duplicates: 10, Finished: true}, p)
	assert.Equal(t, 10, rows(t, e.dbURL, "mailgun"))

	assert.NotContains(t, e.log.String(), "@example.com", "no address in the log")
	assert.NotContains(t, e.log.String(), mailgunKey)
	assert.Contains(t, e.log.String(), "backfill page")
}

// failingSave is the store until the save of page n: it stands for a process killed after
// page n's events were accepted and before its position was saved.
type failingSave struct {
	backfill.ProgressStore
	n, saves int
}

func (f *failingSave) SaveBackfill(ctx context.Context, k backfill.Key, c backfill.Checkpoint) error {
	f.saves++
	if f.saves == f.n {
		return errors.New("killed")
	}
	return f.ProgressStore.SaveBackfill(ctx, k, c)
}

// A run stopped mid-window resumes at the page after the last one saved: the pages saved are
// not fetched again; the page accepted but not saved is, and its events are duplicates.
func TestMailgunBackfillResumesAfterTheLastSavedPage(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	srv := newMailgunServer(t, 10, 3)
	e := newEnv(t)
	job := e.job(t, "mailgun", mailgunSettings(srv, 100))
	job.Progress = &failingSave{ProgressStore: serve.BackfillProgress(e.st), n: 3}
	p, err := backfill.Run(t.Context(), job)
	require.Error(t, err)
	assert.Equal(t, int64(2), p.Pages, "two pages saved")
	assert.Equal(t, 9, rows(t, e.dbURL, "mailgun"), "the third page's events were accepted before the crash")

	job.Progress = serve.BackfillProgress(e.st)
	p, err = backfill.Run(t.Context(), job)
	require.NoError(t, err)
	assert.True(t, p.Resumed)
	assert.Equal(t, backfill.Progress{Pages: 5, Fetched: 10, Accepted: 7, Duplicates: 3, Finished: true, Resumed: true}, p)
	assert.Equal(t, 1, srv.hitsOf(0), "page 1 was saved: not fetched again")
	assert.Equal(t, 1, srv.hitsOf(1), "page 2 was saved: not fetched again")
	assert.Equal(t, 2, srv.hitsOf(2), "page 3 was accepted but not saved: fetched again")
	assert.Equal(t, 1, srv.hitsOf(3))
	assert.Equal(t, 10, rows(t, e.dbURL, "mailgun"))
}

// Requests never exceed reconcile.rate: at most rate+1 (the token bucket's one request ahead)
// in any second, counted at the server.
func TestBackfillKeepsToTheRate(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	const perSecond = 5
	srv := newMailgunServer(t, 14, 1)
	e := newEnv(t)
	start := time.Now()
	p, err := backfill.Run(t.Context(), e.job(t, "mailgun", mailgunSettings(srv, perSecond)))
	require.NoError(t, err)
	require.Equal(t, int64(15), p.Pages)
	srv.mu.Lock()
	times := append([]time.Time(nil), srv.times...)
	srv.mu.Unlock()
	for i, t0 := range times {
		n := 0
		for _, t1 := range times[i:] {
			if t1.Sub(t0) < time.Second {
				n++
			}
		}
		assert.LessOrEqual(t, n, perSecond+1, "requests in the second from request %d", i)
	}
	assert.GreaterOrEqual(t, time.Since(start), time.Duration(float64(len(times)-2)/perSecond*float64(time.Second)))
}

// 429 and 503 are retried after their Retry-After, 500 after a backoff; the page then counts
// once.
func TestBackfillWaitsAsToldAndRetries(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	srv := newMailgunServer(t, 6, 2)
	srv.fail = func(page, hit int) (int, http.Header) {
		switch {
		case page == 1 && hit == 1:
			return http.StatusTooManyRequests, http.Header{"Retry-After": {"1"}}
		case page == 2 && hit == 1:
			return http.StatusServiceUnavailable, http.Header{"Retry-After": {"1"}}
		case page == 3 && hit == 1:
			return http.StatusInternalServerError, nil
		}
		return 0, nil
	}
	e := newEnv(t)
	start := time.Now()
	p, err := backfill.Run(t.Context(), e.job(t, "mailgun", mailgunSettings(srv, 100)))
	require.NoError(t, err)
	assert.Equal(t, backfill.Progress{Pages: 4, Fetched: 6, Accepted: 6, Finished: true}, p)
	assert.Equal(t, 2, srv.hitsOf(1))
	assert.Equal(t, 2, srv.hitsOf(2))
	assert.Equal(t, 2, srv.hitsOf(3))
	assert.GreaterOrEqual(t, time.Since(start), 3*time.Second, "1 s, 1 s and the first backoff's 1 s")
	assert.Equal(t, 6, rows(t, e.dbURL, "mailgun"))
}

// 401 and 403 stop the run at once with an error that names the status and the block to check,
// and never repeats the API's body or the key.
func TestBackfillStopsOnRefusedCredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		srv := newMailgunServer(t, 6, 2)
		srv.fail = func(page, hit int) (int, http.Header) {
			if page == 1 {
				return status, nil
			}
			return 0, nil
		}
		e := newEnv(t)
		p, err := backfill.Run(t.Context(), e.job(t, "mailgun", mailgunSettings(srv, 100)))
		require.Error(t, err)
		assert.ErrorIs(t, err, backfill.ErrUnauthorized)
		assert.Contains(t, err.Error(), strconv.Itoa(status))
		assert.Contains(t, err.Error(), "credentials")
		assert.NotContains(t, err.Error(), mailgunKey)
		assert.NotContains(t, err.Error(), "Forbidden", "the API's body")
		assert.Equal(t, 1, srv.hitsOf(1), "not retried")
		assert.Equal(t, int64(1), p.Pages, "the page before is saved")
		assert.NotContains(t, e.log.String(), mailgunKey)
	}
	// A wrong key: the server's own 401.
	srv := newMailgunServer(t, 1, 2)
	e := newEnv(t)
	s := mailgunSettings(srv, 100)
	s.APIKey = "wrong"
	_, err := backfill.Run(t.Context(), e.job(t, "mailgun", s))
	assert.ErrorIs(t, err, backfill.ErrUnauthorized)
	assert.NotContains(t, err.Error(), "Invalid private key")
}

// The next-page URL is followed only on the configured host: the key is never sent elsewhere.
func TestMailgunNextPageOnAnotherHostIsRefused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"items":[{"id":"a","event":"delivered","timestamp":1}],"paging":{"next":"https://evil.example.net/v3/x/events/p1"}}`))
	}))
	defer srv.Close()
	l, err := backfill.NewLister(backfill.Job{Provider: "mailgun", Since: since, Until: until,
		Settings: providercounts.Settings{BaseURL: srv.URL, APIKey: mailgunKey, Domain: "mg.example.com", Rate: 100}})
	require.NoError(t, err)
	p, err := l.Page(t.Context(), "")
	require.NoError(t, err)
	_, err = l.Page(t.Context(), p.Next)
	assert.ErrorIs(t, err, backfill.ErrRefused)
}
