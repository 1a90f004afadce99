// Package console is the operator console at /console on the admin listener: server-rendered
// pages (html/template, embedded) over what mailhook keeps, and the operator's actions. Its pages
// read through the same interfaces the admin API reads, and its actions call the same Go
// functions the API's handlers call (httpapi.Server's PauseSink, Redeliver, …), after checking
// the same scope: a page can do nothing the API would refuse. There is no JavaScript.
//
// Security: sign-in with an admin token into a signed session cookie (HttpOnly,
// SameSite=Strict, Secure over TLS; session.go), a CSRF token on every form checked on every
// POST, a strict Content-Security-Policy, and the token's scopes decide which pages and buttons
// exist; an action the scope lacks is refused 403 whatever the page showed. Addresses are masked
// in lists (internal/redact) and whole only on a message's own page. Operators' reasons are
// passed on, never logged.
package console

import (
	"context"
	"crypto/subtle"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/httpapi"
	"github.com/mailhook/mailhook/internal/providercounts"
	"github.com/mailhook/mailhook/internal/redact"
	"github.com/mailhook/mailhook/internal/store"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Reads are the console's own reads, beside those of the admin API's interfaces (store,
// internal/store/console.go): each indexed and bounded.
type Reads struct {
	AcceptedPerMinute    func(ctx context.Context, since time.Time) ([]store.MinuteCount, bool, error)
	RejectedPerMinute    func(ctx context.Context, since time.Time) ([]store.MinuteCount, bool, error)
	Unprocessed          func(ctx context.Context) (n int64, capped bool, oldest time.Time, err error)
	QuarantineCount      func(ctx context.Context) (int64, error)
	LatestProviderCounts func(ctx context.Context) ([]providercounts.Check, error)
	ErasureJobs          func(ctx context.Context, limit int) ([]domain.ErasureJob, error)
	ParkedByType         func(ctx context.Context, sink string) (map[string]int64, error)
	// MessageStatuses, when set, gives a recipient search's messages their status, so the
	// bounced one can be told from the others without opening each (store.Messages).
	MessageStatuses func(ctx context.Context, keys []store.MessageKey) (map[store.MessageKey]store.MessageStatus, error)
	// SignOut and SignedOut keep the signed-out sessions where every process reads them
	// (store.Sessions); unset, a sign-out holds in this process only.
	SignOut   func(ctx context.Context, id string, until time.Time) error
	SignedOut func(ctx context.Context, id string) (bool, error)
	// MessageState reads a message's state without its history (the timeline pages it); nil:
	// the API's GetMessage.
	MessageState func(ctx context.Context, provider, messageID string) (store.Message, error)
	// StoredDailyCounts and ProviderCounts read what the daily reconciliation stored for a day;
	// nil: the Reconciliation page counts live, as GET /v1/reports/daily does.
	StoredDailyCounts func(ctx context.Context, day time.Time, provider string) ([]domain.DailyCount, time.Time, error)
	ProviderCounts    func(ctx context.Context, day time.Time, provider string) ([]providercounts.Check, error)
}

// Console serves the pages. Build it with New.
type Console struct {
	api     *httpapi.Server
	reads   Reads
	log     *slog.Logger
	now     func() time.Time
	pages   map[string]*template.Template
	login   *template.Template
	static  http.Handler
	revoked revoked
	limiter signInLimiter
}

// page is one page of the console: its path, its title in the menu, the scope a token needs to
// see it ("" any signed-in token), and what it shows. Adding a page is one entry of pages.
type page struct {
	Path  string
	Title string
	Scope string
	// Template is the file under templates/ that defines "content".
	Template string
	view     func(c *Console, r *http.Request, s session) (any, error)
}

// pages are the console's pages, in menu order.
var pages = []page{
	{Path: "/console", Title: "Overview", Template: "overview.html", view: (*Console).overview},
	{Path: "/console/messages", Title: "Messages", Scope: domain.ScopeMessagesRead, Template: "messages.html", view: (*Console).messages},
	{Path: "/console/events", Title: "Events", Scope: domain.ScopeMessagesRead, Template: "events.html", view: (*Console).events},
	{Path: "/console/rejected", Title: "Rejected", Scope: domain.ScopeReportsRead, Template: "rejected.html", view: (*Console).rejected},
	{Path: "/console/quarantine", Title: "Quarantine", Scope: domain.ScopeReportsRead, Template: "quarantine.html", view: (*Console).quarantine},
	{Path: "/console/sinks", Title: "Sinks", Scope: domain.ScopeSinksRead, Template: "sinks.html", view: (*Console).sinks},
	{Path: "/console/suppressions", Title: "Suppressions", Scope: domain.ScopeSuppressionsCheck, Template: "suppressions.html", view: (*Console).suppressions},
	{Path: "/console/reconciliation", Title: "Reconciliation", Scope: domain.ScopeReportsRead, Template: "reconciliation.html", view: (*Console).reconciliation},
	{Path: "/console/erasures", Title: "Erasures", Scope: domain.ScopeErasure, Template: "erasures.html", view: (*Console).erasures},
	{Path: "/console/audit", Title: "Audit", Scope: domain.ScopeReportsRead, Template: "audit.html", view: (*Console).auditTrail},
}

// action is a form's POST: the scope it needs (the same as its API route's), and what it does;
// it answers the page of Page with its outcome.
type action struct {
	Path  string
	Scope string
	Page  string
	do    func(c *Console, r *http.Request, s session) (notice string, data any, err error)
}

var actions = []action{
	{Path: "/console/sinks/pause", Scope: domain.ScopeSinksWrite, Page: "/console/sinks", do: (*Console).pauseSink},
	{Path: "/console/sinks/resume", Scope: domain.ScopeSinksWrite, Page: "/console/sinks", do: (*Console).resumeSink},
	{Path: "/console/sinks/redeliver", Scope: domain.ScopeSinksWrite, Page: "/console/sinks", do: (*Console).redeliver},
	{Path: "/console/rejected/retry", Scope: domain.ScopeReplay, Page: "/console/rejected", do: (*Console).retryRejected},
	{Path: "/console/quarantine/redrive", Scope: domain.ScopeReplay, Page: "/console/quarantine", do: (*Console).redriveQuarantined},
	{Path: "/console/suppressions/lift", Scope: domain.ScopeSuppressionsWrite, Page: "/console/suppressions", do: (*Console).liftSuppression},
	{Path: "/console/reconciliation/redrive", Scope: domain.ScopeReplay, Page: "/console/reconciliation", do: (*Console).redriveStuck},
}

// New builds the console over the admin API's server (its dependencies, tokens and
// operations) and the console's own reads.
func New(api *httpapi.Server, reads Reads, log *slog.Logger) (*Console, error) {
	if log == nil {
		log = slog.Default()
	}
	c := &Console{api: api, reads: reads, log: log.With("component", "console"), now: time.Now, pages: map[string]*template.Template{}}
	funcs := template.FuncMap{
		"mask": redact.Address,
		"diag": redact.Diagnostic,
		"when": func(t any) string {
			switch v := t.(type) {
			case time.Time:
				if v.IsZero() {
					return ""
				}
				return v.UTC().Format("2006-01-02 15:04:05Z")
			case *time.Time:
				if v == nil {
					return ""
				}
				return v.UTC().Format("2006-01-02 15:04:05Z")
			}
			return ""
		},
		"ago": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return c.now().Sub(t).Round(time.Second).String()
		},
		"fields": fields,
		// wfurl links a workflow into the Temporal UI (temporal.ui_url; "" unset).
		"wfurl": func(id string) string { return api.WorkflowURL(id) },
		"deref": func(p *int64) string {
			if p == nil {
				return "—"
			}
			return fmt.Sprint(*p)
		},
	}
	for _, p := range pages {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+p.Template)
		if err != nil {
			return nil, fmt.Errorf("console template %s: %w", p.Template, err)
		}
		c.pages[p.Path] = t
	}
	login, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/login.html")
	if err != nil {
		return nil, fmt.Errorf("console template login.html: %w", err)
	}
	c.login = login
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	c.static = http.StripPrefix("/console/static/", http.FileServerFS(sub))
	return c, nil
}

// csp allows nothing but this origin's stylesheet: no script at all, no inline style, no
// frames, forms only to this origin.
const csp = "default-src 'self'; script-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; " +
	"frame-ancestors 'none'; base-uri 'none'; object-src 'none'"

// ServeHTTP routes /console and below.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	path := r.URL.Path
	if path == "/console/" {
		path = "/console"
	}
	switch {
	case strings.HasPrefix(path, "/console/static/") && r.Method == http.MethodGet:
		h.Set("Cache-Control", "max-age=3600")
		c.static.ServeHTTP(w, r)
		return
	case path == "/console/login":
		c.signIn(w, r)
		return
	case path == "/console/logout" && r.Method == http.MethodPost:
		c.signOut(w, r)
		return
	}
	for _, p := range pages {
		if p.Path == path && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			s, ok := c.sessionOf(r)
			if !ok {
				// Back to this page once signed in: a link someone was given (simulate prints
				// one) opens where it points.
				http.Redirect(w, r, "/console/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			if !can(s.Scopes, p.Scope) {
				c.render(w, r, s, p, http.StatusForbidden, nil, "", missingScope(p.Scope))
				return
			}
			data, err := p.view(c, r, s)
			status, msg := c.failure(r.Context(), p.Path, err)
			c.render(w, r, s, p, status, data, "", msg)
			return
		}
	}
	for _, a := range actions {
		if a.Path == path && r.Method == http.MethodPost {
			c.act(w, r, a)
			return
		}
	}
	http.Error(w, "no such page", http.StatusNotFound)
}

// can: a token holding scopes may see or do what needs scope ("" any signed-in token).
func can(scopes []string, scope string) bool { return scope == "" || domain.Grants(scopes, scope) }

func missingScope(scope string) string {
	return fmt.Sprintf("this token lacks the scope %q (admin.tokens[].scopes)", scope)
}

// act runs a form's action: a session, its CSRF token and the action's scope first, each
// refused 403 (a forged or stale form, or a token that may not).
func (c *Console) act(w http.ResponseWriter, r *http.Request, a action) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	s, ok := c.sessionOf(r)
	if !ok {
		http.Error(w, "forbidden: not signed in", http.StatusForbidden)
		return
	}
	if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(s.CSRF())) != 1 {
		http.Error(w, "forbidden: the form's CSRF token is missing or not this session's; reload the page", http.StatusForbidden)
		return
	}
	p := pageOf(a.Page)
	if !domain.Grants(s.Scopes, a.Scope) {
		c.render(w, r, s, p, http.StatusForbidden, nil, "", missingScope(a.Scope))
		return
	}
	notice, data, err := a.do(c, r, s)
	status, msg := c.failure(r.Context(), a.Path, err)
	if data == nil && can(s.Scopes, p.Scope) {
		// The page as it is now, with the outcome above it.
		var verr error
		data, verr = p.view(c, r, s)
		if err == nil {
			status, msg = c.failure(r.Context(), p.Path, verr)
		}
	}
	c.render(w, r, s, p, status, data, notice, msg)
}

// audit runs op, an action of the API's operations, as one entry of the audit trail: via the
// console, under the signed-in token's name, with the status the API would have answered.
func (c *Console) audit(r *http.Request, s session, action string, op func(ctx context.Context) error) error {
	return c.api.AuditedAction(r.Context(), action, s.Actor, store.AuditViaConsole, op)
}

func pageOf(path string) page {
	i := slices.IndexFunc(pages, func(p page) bool { return p.Path == path })
	return pages[i]
}

// failure is the status and message of a page's or an action's error: the API's refusal as the
// API answers it, else 503 (logged without the request's values).
func (c *Console) failure(ctx context.Context, what string, err error) (int, string) {
	if err == nil {
		return http.StatusOK, ""
	}
	if status, reason, ok := httpapi.Refusal(err); ok {
		return status, reason
	}
	if ue, ok := err.(userError); ok {
		return http.StatusBadRequest, string(ue)
	}
	c.log.ErrorContext(ctx, "console", "page", what, "error", err)
	return http.StatusServiceUnavailable, "a dependency is unavailable; try again shortly"
}

// userError is a form value the console itself refuses (not a number, …).
type userError string

func (e userError) Error() string { return string(e) }

// navItem is a menu entry.
type navItem struct {
	Path, Title string
	Current     bool
}

// view is what every page's template gets.
type view struct {
	Title  string
	Nav    []navItem
	Actor  string
	CSRF   string
	Notice string
	Error  string
	// Can says which scopes the token holds (Can "sinks:write"): which buttons exist.
	Can  map[string]bool
	Data any
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, s session, p page, status int, data any, notice, msg string) {
	v := view{Title: p.Title, Actor: s.Actor, CSRF: s.CSRF(), Notice: notice, Error: msg, Data: data, Can: map[string]bool{}}
	for _, sc := range domain.Scopes {
		v.Can[sc] = domain.Grants(s.Scopes, sc)
	}
	for _, q := range pages {
		if can(s.Scopes, q.Scope) {
			v.Nav = append(v.Nav, navItem{Path: q.Path, Title: q.Title, Current: q.Path == p.Path})
		}
	}
	t := c.pages[p.Path]
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := t.ExecuteTemplate(w, "layout.html", v); err != nil {
		c.log.ErrorContext(r.Context(), "console render", "page", p.Path, "error", err)
	}
}

// signIn shows the form (GET) and checks the token (POST). The form carries a token that must
// equal a cookie set with it (double submit), so no other site can sign a browser in.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	type loginView struct {
		Title, CSRF, Error string
		Next               string
		Nav                []navItem
		Actor              string
		Notice             string
		Can                map[string]bool
		Data               any
	}
	next := safeNext(r.URL.Query().Get("next")) // a POST's comes from its form, once parsed
	show := func(status int, msg string) {
		tok := randomID()
		setCookie(w, r, loginCookieName, tok, 600)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(status)
		if err := c.login.ExecuteTemplate(w, "layout.html", loginView{Title: "Sign in", CSRF: tok, Error: msg, Next: next}); err != nil {
			c.log.ErrorContext(r.Context(), "console render", "page", "login", "error", err)
		}
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		if _, ok := c.sessionOf(r); ok {
			http.Redirect(w, r, "/console", http.StatusSeeOther)
			return
		}
		show(http.StatusOK, "")
	case http.MethodPost:
		r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
		if err := r.ParseForm(); err != nil {
			show(http.StatusBadRequest, "bad form")
			return
		}
		next = safeNext(r.PostForm.Get("next"))
		ck, err := r.Cookie(loginCookieName)
		if err != nil || ck.Value == "" || subtle.ConstantTimeCompare([]byte(ck.Value), []byte(r.PostForm.Get("csrf"))) != 1 {
			show(http.StatusForbidden, "the sign-in form expired; sign in again")
			return
		}
		release, allowed, wait := c.limiter.reserve(clientAddr(r), c.now())
		if !allowed {
			secs := int(wait.Round(time.Second) / time.Second)
			secs = max(secs, 1)
			w.Header().Set("Retry-After", strconv.Itoa(secs))
			c.log.WarnContext(r.Context(), "console sign-in refused: too many failures from the address")
			show(http.StatusTooManyRequests, fmt.Sprintf("too many failed sign-ins from this address; try again in %d s", secs))
			return
		}
		token := strings.TrimSpace(r.PostForm.Get("token"))
		actor, scopes, ok := c.api.TokenActor(token)
		if !ok {
			c.log.WarnContext(r.Context(), "console sign-in refused")
			show(http.StatusUnauthorized, "not a token of admin.tokens")
			return
		}
		release()
		s := session{Actor: actor, Scopes: scopes, ID: randomID(), Expires: c.now().Add(SessionTTL), key: sessionKey(token)}
		setCookie(w, r, cookieName, s.cookieValue(), int(SessionTTL/time.Second))
		setCookie(w, r, loginCookieName, "", -1)
		c.log.InfoContext(r.Context(), "console sign-in", "actor", actor)
		if next == "" {
			next = "/console"
		}
		http.Redirect(w, r, next, http.StatusSeeOther)
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// safeNext is where a sign-in may return to: a console page of this host ("" when next is
// anything else), so the parameter cannot send a browser to another site.
func safeNext(next string) string {
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || strings.Contains(next, "\\") ||
		strings.HasPrefix(next, "//") || (u.Path != "/console" && !strings.HasPrefix(u.Path, "/console/")) ||
		u.Path == "/console/login" || u.Path == "/console/logout" {
		return ""
	}
	return u.RequestURI()
}

// signOut ends the session: its id is refused from now on by every process (Reads.SignOut: kept
// in PostgreSQL until the cookie would have expired) and the cookie is cleared. When the sign-out
// cannot be recorded the session stays, and the operator is told to try again.
func (c *Console) signOut(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	_ = r.ParseForm()
	s, ok := c.sessionOf(r)
	if !ok || subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(s.CSRF())) != 1 {
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	if c.reads.SignOut != nil {
		if err := c.reads.SignOut(r.Context(), s.ID, s.Expires); err != nil {
			c.log.ErrorContext(r.Context(), "console sign-out not recorded", "error", err)
			http.Error(w, "the sign-out could not be recorded (database unavailable?); the session is still valid: try again", http.StatusServiceUnavailable)
			return
		}
	}
	c.revoked.add(s.ID, s.Expires)
	setCookie(w, r, cookieName, "", -1)
	c.log.InfoContext(r.Context(), "console sign-out", "actor", s.Actor)
	http.Redirect(w, r, "/console/login", http.StatusSeeOther)
}
