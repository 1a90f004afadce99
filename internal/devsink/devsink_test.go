package devsink

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/notify"
	"github.com/mailhook/mailhook/internal/notify/httpsink"
	"github.com/mailhook/mailhook/internal/signature"
)

const secret = "whsec_ZGV2LXNpbmstdGVzdC1zZWNyZXQ="

// A notification signed by mailhook's own sender is printed; a retry is marked; a wrong secret
// is refused with 401, which mailhook records as the sink's rejection.
func TestPrintsVerifiedNotificationsAndRefusesBadSignatures(t *testing.T) {
	var out bytes.Buffer
	h, err := New(secret, &out, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	body := []byte(`{"type":"message.status_changed","data":{"message_id":"msg_1","status":"bounced"}}`)
	s := &httpsink.Sender{}
	for range 2 {
		if _, err := s.Send(t.Context(), srv.URL, secret, notify.Message{ID: "ntf_1", Body: body}, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	got := out.String()
	if strings.Count(got, "notification message.status_changed  id ntf_1  signature ok") != 2 ||
		!strings.Contains(got, `"status": "bounced"`) || strings.Count(got, "a retry") != 1 {
		t.Fatalf("printed:\n%s", got)
	}
	_, err = s.Send(t.Context(), srv.URL, "whsec_b3RoZXItc2VjcmV0", notify.Message{ID: "ntf_2", Body: body}, time.Now())
	var de *notify.DeliveryError
	if !errors.As(err, &de) || de.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong secret: %v", err)
	}
	if strings.Contains(out.String(), "ntf_2") {
		t.Fatal("printed a notification with a bad signature")
	}
}

// A secret that does not decode stops New, before anything listens, and the error does not echo
// it.
func TestNewRefusesABadSecret(t *testing.T) {
	for _, bad := range []string{"", "whsec_", "whsec_not*base64"} {
		_, err := New(bad, &bytes.Buffer{}, nil)
		if !errors.Is(err, signature.ErrInvalidSecret) {
			t.Errorf("New(%q): %v, want ErrInvalidSecret", bad, err)
		}
		if err != nil && bad != "" && strings.Contains(err.Error(), bad) {
			t.Errorf("New(%q): error %q echoes the secret", bad, err)
		}
	}
}
