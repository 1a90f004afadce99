package provider

import "testing"

func TestRecipientTag(t *testing.T) {
	// printf 'msg-1\0jane@example.com' | sha256sum | cut -c1-16
	if got, want := RecipientTag("msg-1", "jane@example.com"), "a6d6d1942e53fce7"; got != want {
		t.Fatalf("RecipientTag = %q, want %q", got, want)
	}
	if RecipientTag("msg-2", "jane@example.com") == RecipientTag("msg-1", "jane@example.com") {
		t.Fatal("one address tags the same in two messages")
	}
	if RecipientTag("msg-1", "john@example.com") == RecipientTag("msg-1", "jane@example.com") {
		t.Fatal("two recipients of one message share a tag")
	}
}
