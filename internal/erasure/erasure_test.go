package erasure

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
)

const jane = "jane.doe+news@example.com"

func matcher(t *testing.T, address string) *Matcher {
	t.Helper()
	m, err := NewMatcher(address)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestValid(t *testing.T) {
	for addr, ok := range map[string]bool{
		jane:                            true,
		"a@b":                           true,
		"élodie@exemple.fr":             true,
		`"a b"@example.com`:             false, // a space: not one token
		"example.com":                   false,
		"@example.com":                  false,
		"jane@":                         false,
		"":                              false,
		"jane@example.com\n":            false,
		HashPrefix + "00":               false,
		strings.Repeat("a", 320) + "@x": false,
	} {
		err := Valid(addr)
		if (err == nil) != ok {
			t.Errorf("Valid(%q) = %v, want ok %v", addr, err, ok)
		}
		if err != nil && (!errors.Is(err, ErrInvalidAddress) || strings.Contains(err.Error(), addr) && addr != "") {
			t.Errorf("Valid(%q): %v: want ErrInvalidAddress, not quoting the address", addr, err)
		}
	}
}

// A mention is the address standing alone, in any case, plain or URL-encoded; a longer address
// that contains it is another person's.
func TestMentions(t *testing.T) {
	m := matcher(t, "ann@example.com")
	for text, want := range map[string]bool{
		"ann@example.com":                        true,
		"ANN@Example.COM":                        true,
		"Ann Smith <ann@example.com>":            true,
		"mailto:ann@example.com?subject=hi":      true,
		"550 5.1.1 <ann@example.com>: unknown":   true,
		"write to ann@example.com.":              true,
		"https://x.test/u?e=ann%40example.com&t": true,
		"https://x.test/u?e=ANN%40EXAMPLE.COM":   true,
		"%3Cann@example.com%3E":                  true,
		"=3Cann@example.com=3E":                  true,
		`"ann@example.com"`:                      true,
		"joann@example.com":                      false,
		"x.ann@example.com":                      false,
		"ann+tag@example.com":                    false,
		"ann@example.com.au":                     false,
		"ann@example.community":                  false,
		"ann@example.com-mail.net":               false,
		"ann at example.com":                     false,
		"":                                       false,
		"élann@example.com":                      false,
		// The first occurrence is another address; the second stands alone.
		"joann@example.com, ann@example.com": true,
	} {
		if got := m.Mentions(text); got != want {
			t.Errorf("Mentions(%q) = %v, want %v", text, got, want)
		}
	}
	// + is %2B in the URL form.
	if !matcher(t, jane).Mentions("unsubscribe?email=jane.doe%2Bnews%40example.com") {
		t.Error("the query-escaped form of an address with + is not found")
	}
}

func TestRedactText(t *testing.T) {
	m := matcher(t, "ann@example.com")
	for in, want := range map[string]string{
		"550 <Ann@Example.com>: no such user; ann@example.com again": "550 <[erased]>: no such user; [erased] again",
		"joann@example.com and ann@example.com":                      "joann@example.com and [erased]",
		"link ?e=ann%40example.com":                                  "link ?e=[erased]",
		"nothing here":                                               "nothing here",
	} {
		got, changed := m.RedactText(in)
		if got != want || changed != (in != want) {
			t.Errorf("RedactText(%q) = %q, %v; want %q", in, got, changed, want)
		}
		if m.Mentions(got) {
			t.Errorf("RedactText(%q) = %q still mentions the address", in, got)
		}
	}
}

// Patterns for ILIKE: wildcards escaped, and every form that Mentions finds is covered.
func TestLikePatterns(t *testing.T) {
	got := matcher(t, "a_b%c@example.com").LikePatterns()
	want := []string{`%a\_b\%c@example.com%`, `%a\_b\%25c\%40example.com%`, `%a\_b\%c\%40example.com%`}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("LikePatterns = %q, want %q", got, want)
	}
	// jsonb prints " and \ escaped: the escaped form is a pattern too.
	got = matcher(t, `a"b@example.com`).LikePatterns()
	if len(got) != 5 || got[1] != `%a\\"b@example.com%` {
		t.Errorf("LikePatterns of an address with a quote: %q", got)
	}
	// Beyond ASCII, any one character: lower() in a C-locale database leaves "Ö" as it is.
	got = matcher(t, "jörg@bücher.de").LikePatterns()
	if got[0] != `%j_rg@b_cher.de%` {
		t.Errorf("LikePatterns of a non-ASCII address: %q", got)
	}
}

// The forms links and form decoders write an address with a + in: only its @ escaped, and the +
// read back as a space (issue 25: both were missed).
func TestMentionsTheFormsOfAPlus(t *testing.T) {
	m := matcher(t, jane)
	for text, want := range map[string]bool{
		"https://x.test/u?e=jane.doe+news%40example.com":   true,
		"https://x.test/u?e=jane.doe%2Bnews%40example.com": true,
		"email=jane.doe news@example.com":                  true,
		"email=jane.doe news%40example.com":                true,
		"jane.doe+news@example.com":                        true,
		"jane.doe@example.com":                             false,
		"news@example.com":                                 false,
	} {
		if got := m.Mentions(text); got != want {
			t.Errorf("Mentions(%q) = %v, want %v", text, got, want)
		}
	}
	for _, p := range []string{"%jane.doe+news\\%40example.com%", "%jane.doe news@example.com%", "%jane.doe news\\%40example.com%"} {
		if !strings.Contains(strings.Join(m.LikePatterns(), " "), p) {
			t.Errorf("LikePatterns %q lack %q", m.LikePatterns(), p)
		}
	}
}

func TestRedactJSON(t *testing.T) {
	m := matcher(t, "ann@example.com")
	in := `{"to":"Ann <ANN@example.com>","cc":["joann@example.com","ann@example.com"],` +
		`"n":12345678901234567890.5,"ok":true,"nil":null,"html":"<a href=\"mailto:ann@example.com\">",` +
		`"escaped":"ann\u0040example.com","ann@example.com":{"[erased]":1},"[erased]":"kept",` +
		`"nested":{"deep":[{"x":"link?e=ann%40example.com"}]}}`
	out, changed, err := m.RedactJSON([]byte(in))
	if err != nil || !changed {
		t.Fatalf("RedactJSON: %v, changed %v", err, changed)
	}
	var got map[string]any
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("not JSON: %s: %v", out, err)
	}
	want := map[string]string{
		"to": `"Ann <[erased]>"`, "cc": `["joann@example.com","[erased]"]`, "n": `12345678901234567890.5`,
		"ok": `true`, "nil": `null`, "html": `"<a href=\"mailto:[erased]\">"`, "escaped": `"[erased]"`,
		"[erased]": `"kept"`, "[erased]#2": `{"[erased]":1}`, "nested": `{"deep":[{"x":"link?e=[erased]"}]}`,
	}
	if len(got) != len(want) {
		t.Errorf("keys %v, want those of %v", got, want)
	}
	for k, w := range want {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(got[k])
		if g := strings.TrimSpace(b.String()); g != w {
			t.Errorf("%s = %s, want %s", k, g, w)
		}
	}
	if m.Mentions(string(out)) {
		t.Errorf("still mentions the address: %s", out)
	}

	// Nothing to change: the same bytes back.
	same := []byte(`{"to": "joann@example.com", "n": 1.50}`)
	out, changed, err = m.RedactJSON(same)
	if err != nil || changed || !bytes.Equal(out, same) {
		t.Errorf("RedactJSON of a document without the address: %s, %v, %v", out, changed, err)
	}
	for _, bad := range []string{`{`, `{} {}`, ``} {
		if _, _, err := m.RedactJSON([]byte(bad)); err == nil {
			t.Errorf("RedactJSON(%q): no error", bad)
		}
	}
}

// A normalized event loses a recipient that is the address: processing it again must find none,
// not suppress the placeholder.
func TestRedactEvent(t *testing.T) {
	m := matcher(t, "ann@example.com")
	out, changed, err := m.RedactEvent([]byte(`{"kind":"status","recipient":"Ann@Example.com","bounce":{"diagnostic":"550 ann@example.com"}}`))
	if err != nil || !changed || string(out) != `{"bounce":{"diagnostic":"550 [erased]"},"kind":"status"}` {
		t.Errorf("RedactEvent: %s, %v, %v", out, changed, err)
	}
	out, changed, err = m.RedactEvent([]byte(`{"recipient":"bob@example.com"}`))
	if err != nil || changed || string(out) != `{"recipient":"bob@example.com"}` {
		t.Errorf("RedactEvent of another recipient: %s, %v, %v", out, changed, err)
	}
}

func TestHasher(t *testing.T) {
	key := bytes.Repeat([]byte{7}, MinKeyBytes)
	h, err := NewHasher(key)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := h.Hash("ann@example.com")
	b, _ := h.Hash("ann@example.com")
	c, _ := h.Hash("bob@example.com")
	other, _ := NewHasher(bytes.Repeat([]byte{8}, MinKeyBytes))
	d, _ := other.Hash("ann@example.com")
	if a != b || a == c || a == d || !IsHash(a) || len(a) != len(HashPrefix)+64 || strings.Contains(a, "ann") {
		t.Errorf("hashes %q %q %q %q", a, b, c, d)
	}
	if Valid(a) == nil {
		t.Error("a hash passes as an address")
	}
	if _, err := (Hasher{}).Hash("ann@example.com"); !errors.Is(err, ErrNoKey) {
		t.Errorf("the zero Hasher: %v, want ErrNoKey", err)
	}
	if _, err := NewHasher(key[:31]); err == nil {
		t.Error("a 31-byte key is accepted")
	}
}

func TestParseKey(t *testing.T) {
	raw := bytes.Repeat([]byte{0xab}, 32)
	for _, s := range []string{base64.StdEncoding.EncodeToString(raw), base64.RawStdEncoding.EncodeToString(raw), " " + base64.StdEncoding.EncodeToString(raw) + "\n"} {
		if key, err := ParseKey(s); err != nil || !bytes.Equal(key, raw) {
			t.Errorf("ParseKey(%q) = %x, %v", s, key, err)
		}
	}
	for _, s := range []string{"", "not base64!", base64.StdEncoding.EncodeToString(raw[:16])} {
		_, err := ParseKey(s)
		if err == nil || (s != "" && strings.Contains(err.Error(), s)) {
			t.Errorf("ParseKey(%q): %v, want an error that does not quote the key", s, err)
		}
	}
}

// A sealed address opens under the same key and job only, and holds no readable address.
func TestSealOpens(t *testing.T) {
	h, err := NewHasher(bytes.Repeat([]byte("k"), MinKeyBytes))
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := h.Seal(jane, []byte("job 1"))
	if err != nil || bytes.Contains(sealed, []byte("jane")) {
		t.Fatalf("Seal: %v %q", err, sealed)
	}
	if got, err := h.Open(sealed, []byte("job 1")); err != nil || got != jane {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if _, err := h.Open(sealed, []byte("job 2")); err == nil {
		t.Fatal("opened under another job's aad")
	}
	other, _ := NewHasher(bytes.Repeat([]byte("o"), MinKeyBytes))
	if _, err := other.Open(sealed, []byte("job 1")); err == nil {
		t.Fatal("opened under another key")
	}
	if _, err := (Hasher{}).Seal(jane, nil); !errors.Is(err, ErrNoKey) {
		t.Fatalf("Seal without a key: %v", err)
	}
}

// The address is found in every spelling of its mailbox (its domain in Unicode or in ASCII,
// composed or decomposed) and the candidate patterns select them; what may be another mailbox
// (İvan for ivan) is not erased with it, except a folded suppression row of an older version,
// which may be either's (issue 41).
func TestMentionsEverySpellingOfTheMailbox(t *testing.T) {
	m := matcher(t, "jörg@xn--bcher-kva.example")
	likes := m.LikePatterns()
	for _, text := range []string{
		"to jörg@bücher.example", "to JÖRG@BÜCHER.EXAMPLE", "to jo\u0308rg@bu\u0308cher.example",
		"to jörg@xn--bcher-kva.example", "email=jo%CC%88rg%40bu%CC%88cher.example",
	} {
		if !m.Mentions(text) {
			t.Errorf("%q mentions the address", text)
		}
		if !anyLike(likes, strings.ToLower(text)) {
			t.Errorf("no candidate pattern selects %q", text)
		}
	}
	iv := matcher(t, "\u0130van@x.com")
	if iv.Mentions("to ivan@x.com") {
		t.Error("İvan@x.com's erasure must not take ivan@x.com's mentions: they may be two mailboxes")
	}
	if !iv.FoldedKey("ivan@x.com") || iv.FoldedKey("jvan@x.com") {
		t.Error("the folded key of İvan@x.com is ivan@x.com, as older versions keyed it")
	}
}

// anyLike is LIKE with PostgreSQL's default escape, for the patterns likePattern makes.
func anyLike(patterns []string, s string) bool {
	for _, p := range patterns {
		var re strings.Builder
		re.WriteString("^")
		esc := false
		for _, r := range p {
			switch {
			case esc:
				re.WriteString(regexp.QuoteMeta(string(r)))
				esc = false
			case r == '\\':
				esc = true
			case r == '%':
				re.WriteString("(?s:.*)")
			case r == '_':
				re.WriteString("(?s:.)")
			default:
				re.WriteString(regexp.QuoteMeta(string(r)))
			}
		}
		re.WriteString("$")
		if regexp.MustCompile(re.String()).MatchString(s) {
			return true
		}
	}
	return false
}

// Metadata and tags are the sender's: a value that is the erased address goes, one that only
// mentions it is redacted, the rest stay; in a stored event and in a notification's data alike.
func TestRedactRemovesMetadataValuesThatAreTheAddress(t *testing.T) {
	m := matcher(t, "ann@example.com")
	out, changed, err := m.RedactEvent([]byte(`{"kind":"status","metadata":{"user":" Ann@Example.com ","note":"for ann@example.com","order":"A-17"},"tags":["ann@example.com","receipts"]}`))
	if err != nil || !changed || string(out) != `{"kind":"status","metadata":{"note":"for [erased]","order":"A-17"},"tags":["receipts"]}` {
		t.Errorf("RedactEvent: %s, %v, %v", out, changed, err)
	}
	out, changed, err = m.RedactJSON([]byte(`{"id":"ntf_1","data":{"metadata":{"user":"ann@example.com","order":"A-17"},"tags":["ann@example.com"]}}`))
	if err != nil || !changed || string(out) != `{"data":{"metadata":{"order":"A-17"},"tags":[]},"id":"ntf_1"}` {
		t.Errorf("RedactJSON: %s, %v, %v", out, changed, err)
	}
	out, changed, err = m.RedactEvent([]byte(`{"metadata":{"user":"bob@example.com"}}`))
	if err != nil || changed || string(out) != `{"metadata":{"user":"bob@example.com"}}` {
		t.Errorf("RedactEvent of another address: %s, %v, %v", out, changed, err)
	}
}
