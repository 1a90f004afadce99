// Package provider defines what every provider adapter implements and the registry that maps a
// configured provider name to its adapter.
package provider

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/mailhook/mailhook/internal/event"
)

// Settings is the per-endpoint configuration an adapter is built from.
type Settings struct {
	// Secrets are all currently valid signing secrets (several during a rotation).
	Secrets []string
	// Tolerance is how far the signed timestamp may be from now, in either direction.
	// Zero means the adapter's default.
	Tolerance time.Duration
}

// Adapter verifies and parses one provider's webhook requests.
type Adapter interface {
	// Verify checks the request's signature over the raw body. It returns an error wrapping
	// ErrUnauthorized when the request must be rejected with 401.
	Verify(header http.Header, body []byte, now time.Time) error
	// Parse turns a verified body into normalized events. It returns an error wrapping
	// ErrBadRequest when the body can never be accepted (400).
	Parse(header http.Header, body []byte) ([]event.Event, error)
}

// ErrUnauthorized marks a verification failure (401).
var ErrUnauthorized = errors.New("unauthorized")

// ErrBadRequest marks a body that can never be accepted (400).
var ErrBadRequest = errors.New("bad request")

// Factory builds an adapter from endpoint settings; it rejects settings it cannot use.
type Factory func(Settings) (Adapter, error)

var (
	mu        sync.RWMutex
	factories = map[string]Factory{}
)

// Register makes a provider available under name. Adapters call it from init.
func Register(name string, f Factory) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := factories[name]; dup {
		panic("provider registered twice: " + name)
	}
	factories[name] = f
}

// New builds the adapter registered under name.
func New(name string, s Settings) (Adapter, error) {
	mu.RLock()
	f, ok := factories[name]
	mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("unknown provider %q (known: %v)", name, Names())
	}
	return f(s)
}

// Names lists the registered providers, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]string, 0, len(factories))
	for n := range factories {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
