package start_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/start"
)

// An event too large for a workflow input is refused before Temporal is asked (the Starter has
// no client here: asking would panic), so a PostgreSQL outage answers it 503 at once.
func TestStartAcceptedRefusesAnEventOverTheInputLimit(t *testing.T) {
	s := &start.Starter{TaskQueue: "mailhook", MaxAcceptedBytes: 64 << 10}
	ev := domain.Event{Provider: "postscale", EventID: "inb_1", Type: "email.received", Kind: domain.KindInbound,
		Raw: append(append([]byte(`{"text":"`), bytes.Repeat([]byte("x"), 64<<10)...), `"}`...)}
	_, err := s.StartAccepted(t.Context(), ev)
	if !errors.Is(err, start.ErrTooLarge) {
		t.Fatalf("a 64 KiB body with a 64 KiB limit: err %v, want start.ErrTooLarge", err)
	}
}
