package httpsink_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/mailhook/mailhook/internal/notify"
	"github.com/mailhook/mailhook/internal/notify/httpsink"
	"github.com/mailhook/mailhook/internal/notify/notifytest"
)

func TestHTTPSinkIsADestination(t *testing.T) {
	notifytest.Run(t, notifytest.Harness{
		Open: func(t *testing.T) (notify.Destination, func(*testing.T) []notifytest.Received) {
			var (
				mu  sync.Mutex
				got []notifytest.Received
			)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				mu.Lock()
				got = append(got, notifytest.Received{Headers: notifytest.Lower(r.Header), Body: body})
				mu.Unlock()
			}))
			t.Cleanup(srv.Close)
			d := httpsink.Destination{Sender: &httpsink.Sender{}, URL: srv.URL, Secret: notifytest.Secret}
			return d, func(*testing.T) []notifytest.Received {
				mu.Lock()
				defer mu.Unlock()
				return append([]notifytest.Received(nil), got...)
			}
		},
		Down: func(t *testing.T) notify.Destination {
			srv := httptest.NewServer(http.NotFoundHandler())
			srv.Close() // nothing listens at its address any more
			return httpsink.Destination{Sender: &httpsink.Sender{}, URL: srv.URL, Secret: notifytest.Secret}
		},
	})
}
