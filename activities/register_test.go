package activities_test

import (
	"reflect"
	"runtime"
	"strings"
	"testing"

	"go.temporal.io/sdk/activity"

	"github.com/mailhook/mailhook/activities"
)

// registry records what Register registers.
type registry struct{ names map[string]string }

func (r *registry) RegisterActivity(any) { panic("register under a stable name") }

func (r *registry) RegisterActivityWithOptions(fn any, o activity.RegisterOptions) {
	full := runtime.FuncForPC(reflect.ValueOf(fn).Pointer()).Name()
	r.names[o.Name] = strings.TrimSuffix(full[strings.LastIndex(full, ".")+1:], "-fm")
}

func (r *registry) RegisterDynamicActivity(any, activity.DynamicRegisterOptions) {
	panic("no dynamic activities")
}

// Workflows call activities by method (a.Process). A worker maps the method to the name it was
// registered under, which histories record; a replayer, which registers no activities, takes
// the method's name. Both agree only while every method is named as it is registered.
func TestActivitiesAreRegisteredUnderTheirMethodNames(t *testing.T) {
	r := &registry{names: map[string]string{}}
	(&activities.Activities{}).Register(r)
	(&activities.Reconcile{}).Register(r)
	(&activities.Retention{}).Register(r)
	if len(r.names) != 25 {
		t.Errorf("registered %d activities, want 25: %v", len(r.names), r.names)
	}
	for name, method := range r.names {
		if name != method {
			t.Errorf("activity %q is method %s: a replay would take it for %q", name, method, method)
		}
	}
}
