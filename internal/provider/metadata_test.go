package provider_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
)

func TestMetadataNormalizesValues(t *testing.T) {
	var m provider.Metadata
	m.Object(json.RawMessage(`{"s":"x","n":42,"b":true,"o":{"a": 1},"l":[1, 2],"z":null}`))
	m.Set("s", json.RawMessage(`"second"`)) // the first value given wins
	m.Tags(json.RawMessage(`["a"," b ","a","",7]`))
	m.Tags(json.RawMessage(`"c"`))
	var ev domain.Event
	m.Apply(&ev)
	want := map[string]string{"s": "x", "n": "42", "b": "true", "o": `{"a":1}`, "l": "[1,2]"}
	if !reflect.DeepEqual(ev.Metadata, want) {
		t.Errorf("metadata %v, want %v", ev.Metadata, want)
	}
	if want := []string{"a", "b", "c"}; !reflect.DeepEqual(ev.Tags, want) {
		t.Errorf("tags %v, want %v", ev.Tags, want)
	}
	if ev.MetadataDropped != 0 {
		t.Errorf("dropped %d, want 0", ev.MetadataDropped)
	}
}

// Past the bounds entries are dropped and counted; the event keeps the rest, the same ones on
// every retry (key order).
func TestMetadataIsBounded(t *testing.T) {
	var m provider.Metadata
	for i := 0; i < provider.MaxMetadataEntries+5; i++ {
		m.SetString(fmt.Sprintf("k%02d", provider.MaxMetadataEntries+5-i), "v")
	}
	m.SetString(strings.Repeat("k", provider.MaxMetadataKeyBytes+1), "v")
	m.SetString("big", strings.Repeat("v", provider.MaxMetadataValueBytes+1))
	m.SetString("nul", "a\x00b")
	m.SetString("", "empty key")
	for i := 0; i < provider.MaxTags+3; i++ {
		m.Tag(fmt.Sprintf("t%02d", i))
	}
	m.Tag(strings.Repeat("t", provider.MaxTagBytes+1))
	var ev domain.Event
	m.Apply(&ev)
	if len(ev.Metadata) != provider.MaxMetadataEntries || ev.Metadata["k01"] != "v" || ev.Metadata["k32"] != "v" {
		t.Errorf("metadata %v: want k01…k32", ev.Metadata)
	}
	if len(ev.Tags) != provider.MaxTags || ev.Tags[0] != "t00" {
		t.Errorf("tags %v: want the first %d", ev.Tags, provider.MaxTags)
	}
	// 5 over the count, 4 malformed entries, 3 tags over the count, 1 tag too long.
	if ev.MetadataDropped != 5+4+3+1 {
		t.Errorf("dropped %d, want 13", ev.MetadataDropped)
	}
	b, err := json.Marshal(ev)
	if err != nil || strings.Contains(string(b), `\u0000`) {
		t.Errorf("the event's JSON %v holds a NUL (jsonb refuses it)", err)
	}
}

// An event without metadata marshals as before: histories and stored events are unchanged.
func TestNoMetadataIsNoJSON(t *testing.T) {
	var m provider.Metadata
	var ev domain.Event
	m.Apply(&ev)
	b, _ := json.Marshal(ev)
	if strings.Contains(string(b), "metadata") || strings.Contains(string(b), "tags") {
		t.Errorf("%s", b)
	}
}
