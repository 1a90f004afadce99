package loadgen

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/provider/providertest"
)

func TestSinkVerifiesAndCountsByID(t *testing.T) {
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("loadgen-sink-test-secret-32bytes"))
	s, err := StartSink("127.0.0.1:0", secret)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	post := func(id, body, sigSecret string) int {
		t.Helper()
		now := time.Now()
		h, err := providertest.StandardHeaders(sigSecret, id, now, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, "http://"+s.Addr()+"/sink", bytes.NewReader([]byte(body)))
		req.Header = h
		req.Header.Set("Idempotency-Key", id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	body := `{"id":"ntf_1","type":"message.status_changed","data":{"provider":"postscale","message_id":"m1","event_id":"e1","status":"delivered","version":1}}`
	if c := post("ntf_1", body, secret); c != 200 {
		t.Fatalf("valid notification answered %d", c)
	}
	if c := post("ntf_1", body, secret); c != 200 { // a retry of the same id
		t.Fatalf("repeat answered %d", c)
	}
	other := "whsec_" + base64.StdEncoding.EncodeToString([]byte("some-other-secret-of-32-bytes!!!"))
	if c := post("ntf_2", body, other); c != http.StatusUnauthorized {
		t.Fatalf("bad signature answered %d", c)
	}
	st := s.Stats()
	if st.Deliveries != 2 || st.DistinctIDs != 1 || st.Repeated != 1 || st.BadSig != 1 || st.IDMismatch != 0 {
		t.Fatalf("%+v", st)
	}
	n := s.Notifications()["ntf_1"]
	if n.Deliveries != 2 || n.MessageID != "m1" || n.Version != 1 || n.Status != "delivered" || n.Type != "message.status_changed" {
		t.Fatalf("%+v", n)
	}
	// The body id must match the header id.
	if c := post("ntf_3", body, secret); c != 200 || s.Stats().IDMismatch != 1 {
		t.Fatalf("id mismatch not counted: %d %+v", c, s.Stats())
	}
}

func TestSinkRefusesNonLoopback(t *testing.T) {
	if _, err := StartSink("0.0.0.0:0", "whsec_"+base64.StdEncoding.EncodeToString([]byte("x"))); err == nil {
		t.Fatal("listened on all interfaces")
	}
}
