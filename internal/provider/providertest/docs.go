package providertest

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/mailhook/mailhook/internal/provider"
)

// DocEndpoint is one endpoint of a docs page's example config.
type DocEndpoint struct {
	Name              string `yaml:"name"`
	Provider          string `yaml:"provider"`
	provider.Settings `yaml:",inline"`
}

// DocEndpoints decodes the first yaml block of a docs page strictly, with ${VAR} expanded by env
// and <placeholders> replaced by a documentation address.
func DocEndpoints(t *testing.T, file string, env func(string) string) []DocEndpoint {
	t.Helper()
	return DocEndpointsAfter(t, file, "", env)
}

// DocEndpointsAfter is DocEndpoints for the first yaml block after the heading line heading
// ("## Inbound"); "" is the page's first block.
func DocEndpointsAfter(t *testing.T, file, heading string, env func(string) string) []DocEndpoint {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	md := string(raw)
	if heading != "" {
		var found bool
		if _, md, found = strings.Cut(md, "\n"+heading+"\n"); !found {
			t.Fatalf("%s has no %q", file, heading)
		}
	}
	_, block, ok := strings.Cut(md, "```yaml\n")
	if !ok {
		t.Fatalf("%s has no yaml block", file)
	}
	block, _, _ = strings.Cut(block, "```")
	block = regexp.MustCompile(`<[^>]+>`).ReplaceAllString(os.Expand(block, env), "192.0.2.1")
	var cfg struct {
		Endpoints []DocEndpoint `yaml:"endpoints"`
	}
	dec := yaml.NewDecoder(strings.NewReader(block))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if len(cfg.Endpoints) == 0 {
		t.Fatalf("%s: no endpoints", file)
	}
	return cfg.Endpoints
}
