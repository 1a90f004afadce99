package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

func (f *contractFixture) getJSON(t *testing.T, target string) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	req.Header.Set("Authorization", "Bearer "+contractToken)
	code, raw := f.do(req)
	var out map[string]any
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		t.Fatalf("GET %s: %d %q: %v", target, code, raw, err)
	}
	return code, out
}

// A sender that writes user+tag@… into the query unencoded must be checked for that address,
// not for "user tag@…", which is never suppressed: a false "send" is the one wrong answer.
func TestSuppressionCheckReadsPlusAsPlus(t *testing.T) {
	f := newContractFixture(t)
	for _, q := range []string{"address=A+B@Example.com", "address=a%2Bb%40example.com", "scope=&address=a+b@example.com&address=other@example.com"} {
		code, resp := f.getJSON(t, "/v1/suppressions/check?"+q)
		if code != http.StatusOK || resp["address"] != "a+b@example.com" || resp["suppressed"] != true || resp["scope"] != "global" {
			t.Errorf("check ?%s: %d %v", q, code, resp)
		}
	}
}

// A page ends at an address boundary, so next_after, an address, never skips the other scopes'
// rows of the page's last address.
func TestListSuppressionsPagesWholeAddresses(t *testing.T) {
	f := newContractFixture(t)
	// The fake's first address is suppressed in two scopes.
	code, resp := f.getJSON(t, "/v1/suppressions?limit=1")
	rows, _ := resp["suppressions"].([]any)
	if code != http.StatusOK || len(rows) != 2 || resp["next_after"] != "user0@example.com" {
		t.Fatalf("page: %d %v, want both rows of user0 and next_after user0", code, resp)
	}
	code, resp = f.getJSON(t, "/v1/suppressions?limit=3")
	rows, _ = resp["suppressions"].([]any)
	if code != http.StatusOK || len(rows) != 4 || resp["next_after"] != "" {
		t.Fatalf("last page: %d %v, want 4 rows of 3 addresses and no next page", code, resp)
	}
}
