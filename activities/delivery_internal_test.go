package activities

import (
	"errors"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/notify"
	"github.com/mailhook/mailhook/internal/notify/httpsink"
)

// A broker sink this process opened no client for (the worker was built without them) parks
// its notifications as unavailable; it never falls back to an HTTP send to an empty URL, which
// would fail them for good.
func TestABrokerSinkWithoutItsClientIsUnavailableNotHTTP(t *testing.T) {
	a := &Activities{Sender: &httpsink.Sender{}}
	bus := config.Sink{Name: "bus", Kind: config.KindNATS, NATS: &config.NATSSink{}}
	_, err := a.destination(bus).Send(t.Context(), notify.Message{ID: "ntf_1"}, time.Now())
	var de *notify.DeliveryError
	if !errors.As(err, &de) || !de.Retryable {
		t.Fatalf("send to a broker sink with no client: %v, want retryable (it parks)", err)
	}
	if _, ok := a.destination(config.Sink{Name: "app", URL: "http://127.0.0.1:1/"}).(httpsink.Destination); !ok {
		t.Fatal("an http sink's destination is not notify.HTTP")
	}
	if _, ok := a.batcher(bus); ok {
		t.Fatal("an unopened broker sink is drained in batches")
	}
}
