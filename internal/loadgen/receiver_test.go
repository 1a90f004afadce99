package loadgen

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/exitcode"
	"github.com/mailhook/mailhook/internal/provider/providertest"
)

func sc(id, msg string, v int64) ReceiverRecord {
	return ReceiverRecord{ID: id, Type: typeStatusChanged, Provider: "postscale", MessageID: msg, Version: v, Code: 200}
}

func TestReceiverBookOrderAndDuplicates(t *testing.T) {
	b := newReceiverBook(false)
	t0 := time.Now()
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Millisecond) }
	for i, r := range []ReceiverRecord{
		sc("a1", "m1", 1), sc("a2", "m1", 2), sc("a2", "m1", 2), // a retry of v2: a duplicate, not a violation
		sc("a3", "m1", 3), sc("a1", "m1", 1), // v1 again after v3: a duplicate and a violation
		sc("b2", "m2", 2), sc("b1", "m2", 1), // m2: v1 after v2, a violation
		sc("c1", "m3", 1),
		// Another provider's message of the same id is another message.
		{ID: "s1", Type: typeStatusChanged, Provider: "sendgrid", MessageID: "m1", Version: 1, Code: 200},
		// Versions of other types do not count; neither do answers other than 2xx.
		{ID: "x1", Type: "suppression.added", Provider: "postscale", MessageID: "m3", Code: 200},
		{ID: "c0", Type: typeStatusChanged, Provider: "postscale", MessageID: "m3", Version: 0, Code: 401},
	} {
		r.At = at(i)
		b.arrive(r)
		b.answer(r, at(i))
		b.leave()
	}
	st := b.stats(time.Second)
	if st.Requests != 11 || st.Answered2xx != 10 || st.DistinctIDs != 9 || st.DistinctIDs2xx != 8 {
		t.Fatalf("counts %+v", st)
	}
	if st.DuplicateIDs != 2 || st.ExtraDeliveries != 2 {
		t.Fatalf("duplicates %d extra %d, want 2 and 2", st.DuplicateIDs, st.ExtraDeliveries)
	}
	if st.OrderViolations != 2 || len(st.OrderViolationExamples) != 2 ||
		!strings.Contains(st.OrderViolationExamples[0], "postscale/m1: version 1 (a1) answered after version 3") ||
		!strings.Contains(st.OrderViolationExamples[1], "postscale/m2: version 1 (b1) answered after version 2") {
		t.Fatalf("violations %d %q", st.OrderViolations, st.OrderViolationExamples)
	}
	if st.MessagesWithVersions != 4 || st.MaxInFlight != 1 {
		t.Fatalf("%+v", st)
	}
	if st.FirstRequest == nil || !st.FirstRequest.Equal(at(0)) || !st.LastRequest.Equal(at(10)) || !st.LastAnswered.Equal(at(9)) {
		t.Fatalf("first/last %v %v %v", st.FirstRequest, st.LastRequest, st.LastAnswered)
	}
}

func TestMaxInWindow(t *testing.T) {
	t0 := time.Now()
	ms := func(n ...int) []time.Time {
		out := make([]time.Time, len(n))
		for i, v := range n {
			out[i] = t0.Add(time.Duration(v) * time.Millisecond)
		}
		return out
	}
	for _, c := range []struct {
		times []time.Time
		w     time.Duration
		want  int
	}{
		{nil, time.Second, 0},
		{ms(0), time.Second, 1},
		// 20 a second, evenly: any 1 s window holds 20.
		{ms(0, 50, 100, 150, 200, 250, 300, 350, 400, 450, 500, 550, 600, 650, 700, 750, 800, 850, 900, 950, 1000, 1050), time.Second, 20},
		// A burst across a second boundary (900..1100 ms) counts whole: the window slides.
		{ms(0, 900, 950, 1000, 1050, 1100, 3000), time.Second, 5},
		// Half-open: 0 and 1000 ms are not within one 1 s window.
		{ms(0, 1000), time.Second, 1},
		{ms(0, 999), time.Second, 2},
		{ms(0, 5000, 9999, 10000), 10 * time.Second, 3},
	} {
		if got := maxInWindow(c.times, c.w); got != c.want {
			t.Errorf("maxInWindow(%v, %s) = %d, want %d", c.times, c.w, got, c.want)
		}
	}
	b := newReceiverBook(false)
	for i := range 30 { // 30 in 300 ms, then 5 a second
		r := sc(fmt.Sprint("n", i), fmt.Sprint("m", i), 1)
		b.answer(r, t0.Add(time.Duration(i)*10*time.Millisecond))
	}
	for i := range 50 {
		r := sc(fmt.Sprint("p", i), fmt.Sprint("q", i), 1)
		b.answer(r, t0.Add(time.Second+time.Duration(i)*200*time.Millisecond))
	}
	st := b.stats(time.Second)
	if st.MaxAnsweredInWindow != 30 || st.MaxAnsweredIn10Windows != 30+45 {
		t.Fatalf("window %d, 10 windows %d", st.MaxAnsweredInWindow, st.MaxAnsweredIn10Windows)
	}
}

func receiverSecret() string {
	return "whsec_" + base64.StdEncoding.EncodeToString([]byte("loadgen-receiver-test-secret-32b"))
}

func postSigned(t *testing.T, c *http.Client, addr, id, secret string, version int64) (int, error) {
	t.Helper()
	body := fmt.Sprintf(`{"id":%q,"type":"message.status_changed","data":{"provider":"postscale","message_id":"m1","event_id":"e%d","status":"delivered","version":%d}}`, id, version, version)
	h, err := providertest.StandardHeaders(secret, id, time.Now(), []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", bytes.NewReader([]byte(body)))
	req.Header = h
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func TestReceiverHangThenOK(t *testing.T) {
	dir := t.TempDir()
	rc, err := StartReceiver(ReceiverOptions{Listen: "127.0.0.1:0", Control: "127.0.0.1:0", Secret: receiverSecret(), Mode: ReceiverHang,
		Out: filepath.Join(dir, "out.json"), RequestsOut: filepath.Join(dir, "requests.jsonl"), RateWindow: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			rc.Stop()
		}
	}()
	// Three clients that give up after 300 ms: each is held, none answered.
	errs := make(chan error, 3)
	for i := range 3 {
		go func() {
			_, err := postSigned(t, &http.Client{Timeout: 300 * time.Millisecond}, rc.Addr(), fmt.Sprint("h", i), receiverSecret(), 1)
			errs <- err
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for rc.Stats().HeldNow < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if st := rc.Stats(); st.HeldNow != 3 || st.MaxHeld != 3 {
		t.Fatalf("held %d (max %d), want 3", st.HeldNow, st.MaxHeld)
	}
	for range 3 {
		if err := <-errs; err == nil {
			t.Fatal("a hanging receiver answered")
		}
	}
	for rc.Stats().HeldNow > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if st := rc.Stats(); st.HeldNow != 0 || st.HeldTotal != 3 || st.Answered2xx != 0 || st.Requests != 3 || st.MaxConnsOpen < 3 {
		t.Fatalf("after the clients gave up: %+v", st)
	}

	// Switch to ok through the control listener: the same port now answers.
	resp, err := http.Post("http://"+rc.ControlAddr()+"/mode?mode=ok", "text/plain", nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("switch: %v %v", err, resp)
	}
	resp.Body.Close()
	c := &http.Client{Timeout: 5 * time.Second}
	for _, v := range []int64{1, 2, 2} {
		if code, err := postSigned(t, c, rc.Addr(), fmt.Sprint("v", v), receiverSecret(), v); err != nil || code != 200 {
			t.Fatalf("ok mode answered %d %v", code, err)
		}
	}
	other := "whsec_" + base64.StdEncoding.EncodeToString([]byte("some-other-secret-of-32-bytes!!!"))
	if code, err := postSigned(t, c, rc.Addr(), "bad", other, 3); err != nil || code != http.StatusUnauthorized {
		t.Fatalf("bad signature answered %d %v", code, err)
	}
	resp, err = http.Get("http://" + rc.ControlAddr() + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	var live ReceiverStats
	if err := json.NewDecoder(resp.Body).Decode(&live); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if live.Mode != ReceiverOK || live.Answered2xx != 3 || live.DuplicateIDs != 1 || live.BadSignatures != 1 || len(live.Modes) != 2 {
		t.Fatalf("stats %+v", live)
	}

	// A request held when the receiver stops is let go unanswered, and the files are written.
	rc.SetMode(ReceiverHang)
	held := make(chan error, 1)
	go func() {
		_, err := postSigned(t, &http.Client{Timeout: 10 * time.Second}, rc.Addr(), "last", receiverSecret(), 9)
		held <- err
	}()
	for rc.Stats().HeldNow < 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	rc.Stop()
	stopped = true
	if err := <-held; err == nil {
		t.Fatal("a request held at stop was answered")
	}
	if err := rc.writeFiles(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "out.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st ReceiverStats
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if st.Requests != 8 || st.Answered2xx != 3 || st.HeldTotal != 4 || st.MaxHeld != 3 || st.Mode != ReceiverHang {
		t.Fatalf("out.json %+v", st)
	}
	lines, err := os.ReadFile(filepath.Join(dir, "requests.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(lines), "\n"); n != 8 {
		t.Fatalf("%d request lines, want 8:\n%s", n, lines)
	}
	if !strings.Contains(string(lines), `"id":"v2","type":"message.status_changed","provider":"postscale","message_id":"m1","version":2`) {
		t.Fatalf("request log:\n%s", lines)
	}
}

func TestReceiverOptions(t *testing.T) {
	for _, o := range []ReceiverOptions{
		{Listen: "127.0.0.1:0", Secret: receiverSecret(), Mode: ReceiverRefuse, RateWindow: time.Second},
		{Listen: "127.0.0.1:0", Secret: receiverSecret(), Mode: "slow", RateWindow: time.Second},
		{Listen: "0.0.0.0:0", Secret: receiverSecret(), Mode: ReceiverOK, RateWindow: time.Second},
		{Listen: "127.0.0.1:0", Control: "0.0.0.0:0", Secret: receiverSecret(), Mode: ReceiverOK, RateWindow: time.Second},
		{Listen: "127.0.0.1:0", Mode: ReceiverOK, RateWindow: time.Second},
		{Listen: "127.0.0.1:0", Secret: receiverSecret(), Mode: ReceiverOK},
	} {
		if _, err := StartReceiver(o); err == nil || !exitcode.IsUsage(err) {
			t.Errorf("%+v: %v, want a usage error", o, err)
		}
	}
}
