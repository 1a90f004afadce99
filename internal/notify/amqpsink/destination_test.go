package amqpsink_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mailhook/mailhook/internal/notify"
	"github.com/mailhook/mailhook/internal/notify/notifytest"
	"github.com/mailhook/mailhook/internal/testenv"
)

func TestRabbitMQSinkIsADestination(t *testing.T) {
	notifytest.Run(t, notifytest.Harness{
		Open: func(t *testing.T) (notify.Destination, func(*testing.T) []notifytest.Received) {
			url := testenv.RabbitMQVhost(t)
			ch := bindQueue(t, url)
			cfg := sinkConfig(url, false)
			cfg.Secret = notifytest.Secret
			s := open(t, cfg)
			// A Get takes a message off the queue: what was read is kept.
			var got []notifytest.Received
			return s, func(t *testing.T) []notifytest.Received {
				for _, d := range drain(t, ch) {
					h := map[string]string{}
					for k, v := range d.Headers {
						h[strings.ToLower(k)] = fmt.Sprint(v)
					}
					got = append(got, notifytest.Received{Headers: h, Body: d.Body})
				}
				return got
			}
		},
		// The exchange does not exist (and is not declared).
		Down: func(t *testing.T) notify.Destination {
			return open(t, sinkConfig(testenv.RabbitMQVhost(t), false))
		},
	})
}
