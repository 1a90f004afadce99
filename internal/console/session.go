package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A session is a signed cookie: the token's name, an expiry and a random id, under an HMAC keyed
// by the admin token it was signed in with. Nothing is kept server-side but the ids signed out
// (in PostgreSQL, store.Sessions, until they expire: a copied cookie is refused by every process
// once signed out), so a restart or another replica with the same config keeps the session;
// removing or rotating a token ends its sessions at once, and the cookie never holds the token.
const (
	cookieName      = "mailhook_console"
	loginCookieName = "mailhook_console_login"
	cookiePath      = "/console"
	// SessionTTL is how long a sign-in lasts.
	SessionTTL = 8 * time.Hour
	sessionVer = "v1"
)

// session is a signed-in operator.
type session struct {
	Actor   string
	Scopes  []string
	ID      string
	Expires time.Time
	key     []byte // the token's session key: signs the cookie and derives the CSRF token
}

// sessionKey derives a token's key; the token itself is never in a cookie or a page.
func sessionKey(token string) []byte {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("mailhook console session " + sessionVer))
	return m.Sum(nil)
}

func sign(key []byte, parts ...string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(strings.Join(parts, "\x00")))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// cookieValue is the session as its cookie holds it.
func (s session) cookieValue() string {
	actor := base64.RawURLEncoding.EncodeToString([]byte(s.Actor))
	exp := strconv.FormatInt(s.Expires.Unix(), 10)
	return strings.Join([]string{sessionVer, actor, exp, s.ID, sign(s.key, sessionVer, actor, exp, s.ID)}, ".")
}

// CSRF is the session's form token: bound to its id, so a form of one session is refused in
// another.
func (s session) CSRF() string { return sign(s.key, "csrf", s.ID) }

func randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails
	return hex.EncodeToString(b)
}

// revoked holds the ids of the sessions signed out, until they would have expired.
type revoked struct {
	mu  sync.Mutex
	ids map[string]time.Time
}

func (r *revoked) add(id string, until time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ids == nil {
		r.ids = map[string]time.Time{}
	}
	now := time.Now()
	for k, t := range r.ids {
		if now.After(t) {
			delete(r.ids, k)
		}
	}
	r.ids[id] = until
}

func (r *revoked) has(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.ids[id]
	return ok
}

// sessionOf is the request's valid session: its cookie signed under a configured token's key,
// for that token's name, not expired, not signed out. Every token is tried in constant time.
func (c *Console) sessionOf(r *http.Request) (session, bool) {
	ck, err := r.Cookie(cookieName)
	if err != nil {
		return session{}, false
	}
	parts := strings.Split(ck.Value, ".")
	if len(parts) != 5 || parts[0] != sessionVer {
		return session{}, false
	}
	actorB, err := base64.RawURLEncoding.DecodeString(parts[1])
	exp, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err != nil || err2 != nil {
		return session{}, false
	}
	var found session
	ok := false
	for token, name := range c.api.AdminTokens {
		key := sessionKey(token)
		want := sign(key, parts[0], parts[1], parts[2], parts[3])
		if subtle.ConstantTimeCompare([]byte(want), []byte(parts[4])) == 1 && name == string(actorB) {
			found = session{Actor: name, Scopes: c.api.TokenScopes[token], ID: parts[3], Expires: time.Unix(exp, 0), key: key}
			ok = true
		}
	}
	if !ok || !c.now().Before(found.Expires) || c.revoked.has(found.ID) {
		return session{}, false
	}
	if c.reads.SignedOut != nil {
		// Signed out in another process? One primary-key read per console request. When it
		// cannot be read the session is refused: a sign-out must hold.
		out, err := c.reads.SignedOut(r.Context(), found.ID)
		if err != nil {
			c.log.WarnContext(r.Context(), "console session not checked", "error", err)
			return session{}, false
		}
		if out {
			c.revoked.add(found.ID, found.Expires)
			return session{}, false
		}
	}
	return found, true
}

// secure: the cookie is sent over TLS only when the request came over TLS (here, or at a proxy
// that says so: a client that lies about it only keeps its own cookie from coming back).
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: cookiePath, MaxAge: maxAge, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: secure(r)})
}
