package provider

import (
	"errors"
	"testing"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider/jsonfield"
)

// innermost is what the HTTP layer reports as a 400's reason.
func innermost(err error) string {
	for {
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			errs := u.Unwrap()
			err = errs[len(errs)-1]
		default:
			return err.Error()
		}
	}
}

func TestDecodeReasons(t *testing.T) {
	for body, want := range map[string]string{
		`{`:    "malformed JSON at offset 1",
		`[1]`:  "body is a JSON array, not an object",
		`null`: "body is JSON null, not an object",
		``:     "malformed JSON at offset 0",
	} {
		_, err := DecodeObject("p", []byte(body))
		if !errors.Is(err, ErrBadRequest) || innermost(err) != want {
			t.Errorf("DecodeObject(%q) = %v, want reason %q", body, err, want)
		}
	}
	for body, want := range map[string]string{
		`{}`:   "body is a JSON object, not an array",
		`null`: "body is JSON null, not an array",
	} {
		_, err := DecodeBatch("p", []byte(body))
		if !errors.Is(err, ErrBadRequest) || innermost(err) != want {
			t.Errorf("DecodeBatch(%q) = %v, want reason %q", body, err, want)
		}
	}
}

func TestFields(t *testing.T) {
	o := jsonfield.Object{"s": []byte(`" x "`), "n": []byte(`1`), "z": []byte(`null`), "b": []byte(`"  "`)}
	f := Fields{Provider: "p", Where: "element 2: ", Path: "data."}
	if s, err := f.Required(o, "s"); err != nil || s != " x " {
		t.Errorf("Required(s) = %q, %v", s, err)
	}
	for key, want := range map[string]string{
		"absent": `element 2: missing "data.absent"`, "z": `element 2: missing "data.z"`,
		"n": `element 2: "data.n" is not a string`, "b": `element 2: "data.b" is empty`,
	} {
		if _, err := f.Required(o, key); err == nil || innermost(err) != want {
			t.Errorf("Required(%s) = %v, want %q", key, err, want)
		}
	}
	if s, err := f.Optional(o, "s"); err != nil || s != "x" {
		t.Errorf("Optional(s) = %q, %v", s, err)
	}
	if s, err := f.Optional(o, "z"); err != nil || s != "" {
		t.Errorf("Optional(null) = %q, %v", s, err)
	}
	if _, err := f.Optional(o, "n"); err == nil || innermost(err) != `element 2: "data.n" is not a string` {
		t.Errorf("Optional(n) = %v", err)
	}
}

func TestClassifyAndMessageRule(t *testing.T) {
	types := map[string]Class{"delivered": {Kind: domain.KindStatus, Status: domain.StatusDelivered}}
	if c := Classify(types, "other"); c.Kind != domain.KindUnknown || c.Status != domain.StatusNone {
		t.Errorf("unknown type = %+v", c)
	}
	ev := domain.Event{Kind: domain.KindStatus, Status: domain.StatusBounced, BounceType: domain.BounceHard}
	if !Unapplicable(&ev) {
		t.Fatal("a status event without a message id is applicable")
	}
	KeepAsUnknown(&ev)
	if ev.Kind != domain.KindUnknown || ev.Status != domain.StatusNone || ev.BounceType != "" {
		t.Errorf("KeepAsUnknown = %+v", ev)
	}
	inbound := domain.Event{Kind: domain.KindInbound}
	if Unapplicable(&inbound) {
		t.Error("an inbound event needs no message id")
	}
}
