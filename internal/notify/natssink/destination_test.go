package natssink_test

import (
	"net/http"
	"testing"

	"github.com/mailhook/mailhook/internal/notify"
	"github.com/mailhook/mailhook/internal/notify/notifytest"
	"github.com/mailhook/mailhook/internal/testenv"
)

func TestNATSSinkIsADestination(t *testing.T) {
	notifytest.Run(t, notifytest.Harness{
		Open: func(t *testing.T) (notify.Destination, func(*testing.T) []notifytest.Received) {
			url := testenv.NATSURL(t)
			name := testenv.RandomName("MHTEST_")
			deleteStream(t, url, name)
			cfg := sinkConfig(url, name, true)
			cfg.Secret = notifytest.Secret
			s := open(t, cfg)
			return s, func(t *testing.T) []notifytest.Received {
				_, msgs := stream(t, url, name)
				out := make([]notifytest.Received, len(msgs))
				for i, m := range msgs {
					out[i] = notifytest.Received{Headers: notifytest.Lower(http.Header(m.Headers())), Body: m.Data()}
				}
				return out
			}
		},
		// No stream for its subject, and none may be created.
		Down: func(t *testing.T) notify.Destination {
			url := testenv.NATSURL(t)
			return open(t, sinkConfig(url, testenv.RandomName("MHTEST_"), false))
		},
		Dedupes: true,
	})
}
