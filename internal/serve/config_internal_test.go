package serve

import (
	"reflect"
	"slices"
	"testing"

	"github.com/mailhook/mailhook/internal/config"
)

// Every setting of an endpoint reaches what its adapter and its counts reader are built from:
// a field added to config.ProviderSettings or config.Reconcile and not converted fails here.
func TestEndpointSettingsCarryEveryField(t *testing.T) {
	var e config.Endpoint
	fill(reflect.ValueOf(&e).Elem(), "endpoint")
	for name, conv := range map[string]struct {
		block any
		opts  any
	}{
		"provider settings": {e.ProviderSettings, ProviderSettings(e)},
		"reconcile":         {*e.Reconcile, CountsSettings(*e.Reconcile)},
	} {
		got := values(reflect.ValueOf(conv.opts))
		want := values(reflect.ValueOf(conv.block))
		if len(want) < 5 {
			t.Fatalf("%s: filled only %q", name, want)
		}
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("%s: the converted settings lack %s", name, w)
			}
		}
		if n, m := count(got, "bool true"), count(want, "bool true"); n != m {
			t.Errorf("%s: %d of the block's %d switches reach the converted settings", name, n, m)
		}
	}
	// The adapter's copy of the generic mapping is its own.
	s := ProviderSettings(e)
	s.Generic.StatusMap["x"] = "y"
	if _, ok := e.Generic.StatusMap["x"]; ok {
		t.Error("ProviderSettings shares the config's status_map")
	}
}
