package config

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/agnivade/levenshtein"
	"go.yaml.in/yaml/v3"
)

// unknownKey finds the first key of doc that names no field of Config, and says where it is and
// which key was probably meant. yaml's own strict decoding reports the Go type
// ("field adress_typo not found in type config.HTTP"), which a user cannot look up.
func unknownKey(doc *yaml.Node) error {
	return checkKeys(doc, reflect.TypeFor[Config](), "")
}

var unmarshaler = reflect.TypeFor[yaml.Unmarshaler]()

func checkKeys(n *yaml.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		return checkKeys(n.Content[0], t, path)
	}
	if reflect.PointerTo(t).Implements(unmarshaler) {
		return nil // it reads its own node
	}
	switch {
	case n.Kind == yaml.SequenceNode && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		for i, c := range n.Content {
			if err := checkKeys(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Map:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := checkKeys(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value)); err != nil {
				return err
			}
		}
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Struct:
		fields := map[string]reflect.Type{}
		yamlFields(t, fields)
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i]
			ft, ok := fields[key.Value]
			if !ok {
				return fmt.Errorf("line %d: unknown key %s%s", key.Line, join(path, key.Value), suggest(key.Value, fields, path))
			}
			if err := checkKeys(n.Content[i+1], ft, join(path, key.Value)); err != nil {
				return err
			}
		}
	}
	// Anything else is a scalar, or a shape the decoder itself refuses with a line number.
	return nil
}

// yamlFields collects the keys of struct t as yaml decodes them, inline fields included.
func yamlFields(t reflect.Type, into map[string]reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if strings.Contains(","+opts+",", ",inline,") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				yamlFields(ft, into)
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		into[name] = f.Type
	}
}

// suggest names the known key closest to key when it is close enough to be a typo: within half
// its length of the whole key, or within a third of the known key's length of how key begins
// (a typo with something appended, such as adress_typo for address).
func suggest(key string, fields map[string]reflect.Type, path string) string {
	best, bestDist := "", len(key)
	for name := range fields {
		d := levenshtein.ComputeDistance(key, name)
		if d > len(key)/2 {
			d = len(key) // not a typo of the whole key
		}
		if len(key) > len(name) {
			if p := levenshtein.ComputeDistance(key[:len(name)], name); p <= len(name)/3 {
				d = min(d, p+1)
			}
		}
		if d < bestDist || (d == bestDist && best != "" && name < best) {
			best, bestDist = name, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", join(path, best))
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
