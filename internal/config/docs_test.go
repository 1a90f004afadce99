package config

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mailhook/mailhook/internal/testenv"
)

// docKey is a config key as the docs write it: `http.max_body_bytes`, `sinks[].rate`.
var docKey = regexp.MustCompile("`([a-z_]+(?:\\.[a-z_0-9]+|\\[[0-9]*\\])+)`")

// notKeys are dotted names the docs write that are not config keys although they begin with a
// section's name: notification types, table columns and audit actions.
var notKeys = []string{"suppression.added", "suppression.lifted", "report.daily", "sinks.state", "suppression.lift"}

// Every config key the README and docs/ name exists: renaming or removing a key without the docs
// fails here, not on a reader's first try.
func TestDocsNameOnlyConfigKeysThatExist(t *testing.T) {
	files := testenv.DocFiles(t, "../..")
	top := map[string]reflect.Type{}
	yamlFields(reflect.TypeFor[Config](), top)
	var wrong []string
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range docKey.FindAllStringSubmatch(string(raw), -1) {
			key := m[1]
			section, _, _ := strings.Cut(key, ".")
			section, _, _ = strings.Cut(section, "[")
			if _, ok := top[section]; !ok || slices.Contains(notKeys, key) || strings.HasSuffix(key, ".go") {
				continue // not a config key (a table column, a JSON field, a file)
			}
			if !keyExists(key) {
				wrong = append(wrong, filepath.Base(f)+": "+key)
			}
		}
	}
	slices.Sort(wrong)
	if wrong = slices.Compact(wrong); len(wrong) > 0 {
		t.Errorf("the docs name config keys that do not exist:\n%s", strings.Join(wrong, "\n"))
	}
}

// keyExists follows a dotted key (with [] or [N] for list elements) through Config's yaml fields.
func keyExists(key string) bool {
	t := reflect.TypeFor[Config]()
	for _, part := range strings.Split(strings.NewReplacer("[]", ".[]", "[", ".[").Replace(key), ".") {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch {
		case strings.HasPrefix(part, "["):
			if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
				return false
			}
			t = t.Elem()
		case t.Kind() == reflect.Map:
			t = t.Elem()
		case t.Kind() == reflect.Struct:
			fields := map[string]reflect.Type{}
			yamlFields(t, fields)
			ft, ok := fields[part]
			if !ok {
				return false
			}
			t = ft
		default:
			return false
		}
	}
	return true
}

// deploy/mailhook.example.yaml is the configuration reference: every key Config reads appears in
// it, set or commented out with what it does (TestExampleConfigLoads checks that what it sets
// exists). A key added to Config without it fails here.
func TestTheExampleConfigShowsEveryKey(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/mailhook.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	example := string(raw)
	var missing []string
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(unmarshaler) || t.PkgPath() == "time" {
			return
		}
		fields := map[string]reflect.Type{}
		yamlFields(t, fields)
		for name, ft := range fields {
			key := join(path, name)
			if key == "acceptance.mode" {
				continue // no longer read: a config that sets it loads with a warning
			}
			if !regexp.MustCompile(`(?m)(^|[\s{,#])` + regexp.QuoteMeta(name) + `:`).MatchString(example) {
				missing = append(missing, key)
			}
			walk(ft, key)
		}
	}
	walk(reflect.TypeFor[Config](), "")
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("deploy/mailhook.example.yaml does not show these keys:\n%s", strings.Join(missing, "\n"))
	}
}
