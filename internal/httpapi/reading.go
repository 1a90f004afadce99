package httpapi

import "sync"

// ReadingBudget bounds the bytes of webhook bodies being read at once, in all and per client
// address. A body is read before it can be authenticated, so without a bound a few thousand slow
// unsigned uploads hold gigabytes; with one bound only, a single client holding it would refuse
// every provider. A request takes its declared length (or http.max_body_bytes when it declares
// none) before it reads a byte, and gives it back once answered; what does not fit is refused
// at once, never queued.
type ReadingBudget struct {
	total, perClient int64
	mu               sync.Mutex
	used             int64
	byClient         map[string]int64
}

// NewReadingBudget bounds reading to total bytes, and perClient bytes per client address.
func NewReadingBudget(total, perClient int64) *ReadingBudget {
	return &ReadingBudget{total: total, perClient: perClient, byClient: map[string]int64{}}
}

// Take reserves n bytes for client, or reports false when either bound would be exceeded. A nil
// budget takes everything.
func (b *ReadingBudget) Take(client string, n int64) bool {
	if b == nil || n <= 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.total || b.byClient[client]+n > b.perClient {
		return false
	}
	b.used += n
	b.byClient[client] += n
	return true
}

// Give returns what Take reserved.
func (b *ReadingBudget) Give(client string, n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if b.byClient[client] -= n; b.byClient[client] <= 0 {
		delete(b.byClient, client)
	}
}
