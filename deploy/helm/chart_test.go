// Package helm holds the test that ties the Helm chart (deploy/helm/mailhook) to mailhook's own
// config: each pod it renders must start with the config file, environment and files it is
// given. The manifests' API types are checked by the module in deploy/helm/test.
package helm

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/mailhook/mailhook/internal/config"
	// The providers the mailhook binary registers, so endpoints validate as they do at start-up.
	_ "github.com/mailhook/mailhook/internal/serve"
)

// What the test reads of the rendered manifests: no more than it checks, decoded leniently
// (deploy/helm/test decodes them strictly into the Kubernetes types).
type manifest struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name        string            `yaml:"name"`
		Annotations map[string]string `yaml:"annotations"`
	} `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
	Spec       struct {
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type podSpec struct {
	TerminationGracePeriodSeconds *int64      `yaml:"terminationGracePeriodSeconds"`
	Containers                    []container `yaml:"containers"`
	Volumes                       []volume    `yaml:"volumes"`
}

type volume struct {
	Name      string `yaml:"name"`
	ConfigMap *struct {
		Name  string      `yaml:"name"`
		Items []keyToPath `yaml:"items"`
	} `yaml:"configMap"`
	Secret *struct {
		SecretName string      `yaml:"secretName"`
		Items      []keyToPath `yaml:"items"`
	} `yaml:"secret"`
	EmptyDir *struct{} `yaml:"emptyDir"`
}

type keyToPath struct {
	Key  string `yaml:"key"`
	Path string `yaml:"path"`
}

type container struct {
	Name string `yaml:"name"`
	Env  []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef *struct {
				Name     string `yaml:"name"`
				Key      string `yaml:"key"`
				Optional bool   `yaml:"optional"`
			} `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
	Lifecycle *struct {
		PreStop *struct {
			Sleep *struct {
				Seconds int64 `yaml:"seconds"`
			} `yaml:"sleep"`
		} `yaml:"preStop"`
	} `yaml:"lifecycle"`
}

// rendered is a directory holding each value set of deploy/helm/mailhook/ci rendered by
// scripts/check-helm.sh: the one it names in MAILHOOK_HELM_RENDERED, or one rendered here.
func rendered(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("MAILHOOK_HELM_RENDERED"); dir != "" {
		return dir
	}
	script := filepath.Join("..", "..", "scripts", "check-helm.sh")
	if testing.Short() {
		// Building helm takes minutes: -short renders only with one already built.
		if err := exec.Command(script, "cached").Run(); err != nil {
			t.Skip("-short and helm is not built yet: scripts/check-helm.sh builds it")
		}
	}
	dir := t.TempDir()
	cmd := exec.Command(script, "render", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("scripts/check-helm.sh render: %v\n%s", err, stderr.String())
	}
	return dir
}

func readManifests(t *testing.T, path string) []manifest {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []manifest
	dec := yaml.NewDecoder(f)
	for {
		var m manifest
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if m.Kind != "" {
			out = append(out, m)
		}
	}
}

// existingSecrets are the Secrets the value sets expect in the cluster before the install.
func existingSecrets(t *testing.T) map[string]manifest {
	t.Helper()
	out := map[string]manifest{}
	for _, m := range readManifests(t, filepath.Join("testdata", "existing-secrets.yaml")) {
		out[m.Metadata.Name] = m
	}
	return out
}

// Every pod the chart renders starts: mailhook's own loader (strict keys, ${VAR} expansion,
// validation, the TLS files it names) accepts the ConfigMap with exactly the environment and the
// files the pod gets; its ports are the ones the config listens on; and it is given the time to
// shut down that the config asks for.
func TestChartPodsLoadTheirConfig(t *testing.T) {
	dir := rendered(t)
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 {
		t.Fatalf("only %d rendered value sets in %s", len(files), dir)
	}
	existing := existingSecrets(t)
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".yaml"), func(t *testing.T) {
			objects := readManifests(t, f)
			byKind := func(kind string) map[string]manifest {
				out := map[string]manifest{}
				for _, m := range objects {
					if m.Kind == kind {
						out[m.Metadata.Name] = m
					}
				}
				return out
			}
			configMaps, secrets := byKind("ConfigMap"), byKind("Secret")
			for name, s := range existing {
				if _, ok := secrets[name]; !ok {
					secrets[name] = s
				}
			}
			pods := 0
			var configs []string
			for _, m := range objects {
				if m.Kind != "Deployment" && m.Kind != "Job" {
					continue
				}
				pods++
				component := m.Spec.Template.Metadata.Labels["app.kubernetes.io/component"]
				pod := m.Spec.Template.Spec
				if len(pod.Containers) != 1 {
					t.Fatalf("%s %s: %d containers, want 1", m.Kind, m.Metadata.Name, len(pod.Containers))
				}
				cfg, text := startPod(t, m.Kind+" "+m.Metadata.Name, pod, configMaps, secrets)
				configs = append(configs, text)
				checkPorts(t, component, pod.Containers[0], cfg)
				checkGrace(t, component, pod, cfg)
			}
			if pods != 3 {
				t.Errorf("%d pods (Deployments and Jobs), want the server, the worker and the migration", pods)
			}
			// The migration reads the same config as the pods it migrates for.
			for _, c := range configs[1:] {
				if c != configs[0] {
					t.Errorf("the pods read different config files:\n%s\n---\n%s", configs[0], c)
				}
			}
		})
	}
}

// startPod lays out the pod's files under a temporary root, sets its environment, and loads
// its config as mailhook would at start-up.
func startPod(t *testing.T, name string, pod podSpec, configMaps, secrets map[string]manifest) (config.Config, string) {
	t.Helper()
	c := pod.Containers[0]
	root := t.TempDir()
	var mountPaths []string
	for _, vm := range c.VolumeMounts {
		i := slices.IndexFunc(pod.Volumes, func(v volume) bool { return v.Name == vm.Name })
		if i < 0 {
			t.Fatalf("%s mounts volume %s, which it does not declare", name, vm.Name)
		}
		v := pod.Volumes[i]
		dir := filepath.Join(root, vm.MountPath)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var data map[string]string
		var items []keyToPath
		switch {
		case v.ConfigMap != nil:
			cm, ok := configMaps[v.ConfigMap.Name]
			if !ok {
				t.Fatalf("%s mounts ConfigMap %s, which is not rendered", name, v.ConfigMap.Name)
			}
			data, items = cm.Data, v.ConfigMap.Items
		case v.Secret != nil:
			s, ok := secrets[v.Secret.SecretName]
			if !ok {
				t.Fatalf("%s mounts Secret %s, which is neither rendered nor in testdata/existing-secrets.yaml", name, v.Secret.SecretName)
			}
			data, items = s.StringData, v.Secret.Items
		case v.EmptyDir != nil:
			continue
		default:
			t.Fatalf("%s: volume %s is of a kind this test does not lay out", name, v.Name)
		}
		mountPaths = append(mountPaths, vm.MountPath)
		if items == nil {
			for k := range data {
				items = append(items, keyToPath{Key: k, Path: k})
			}
		}
		for _, it := range items {
			content, ok := data[it.Key]
			if !ok {
				t.Fatalf("%s: volume %s projects key %q, which its source lacks: the kubelet would not start the pod", name, v.Name, it.Key)
			}
			if err := os.WriteFile(filepath.Join(dir, it.Path), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}

	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			r := e.ValueFrom.SecretKeyRef
			s, ok := secrets[r.Name]
			v, has := s.StringData[r.Key]
			switch {
			case has:
				env[e.Name] = v
			case !r.Optional && !ok:
				t.Fatalf("%s: %s reads Secret %s, which is neither rendered nor in testdata/existing-secrets.yaml", name, e.Name, r.Name)
			case !r.Optional:
				t.Fatalf("%s: %s reads key %s of Secret %s, which it lacks: the kubelet would not start the pod", name, e.Name, r.Key, r.Name)
			}
		default:
			t.Fatalf("%s: %s comes from a source this test does not resolve", name, e.Name)
		}
	}
	configPath := env["MAILHOOK_CONFIG"]
	if configPath == "" {
		t.Fatalf("%s: no MAILHOOK_CONFIG", name)
	}
	raw, err := os.ReadFile(filepath.Join(root, configPath))
	if err != nil {
		t.Fatalf("%s: MAILHOOK_CONFIG %s is not a file of its volumes: %v", name, configPath, err)
	}
	// The pod's absolute paths (the TLS files) are under root here.
	sort.Slice(mountPaths, func(i, j int) bool { return len(mountPaths[i]) > len(mountPaths[j]) })
	var pairs []string
	for _, p := range mountPaths {
		pairs = append(pairs, p+"/", filepath.Join(root, p)+"/")
	}
	local := filepath.Join(root, "mailhook-local.yaml")
	if err := os.WriteFile(local, []byte(strings.NewReplacer(pairs...).Replace(string(raw))), 0o600); err != nil {
		t.Fatal(err)
	}
	// Only the pod's environment: what this machine has set must not fill a gap of the chart.
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		for _, prefix := range []string{"MAILHOOK_", "DATABASE_", "TEMPORAL_", "POSTSCALE_", "OTEL_"} {
			if strings.HasPrefix(k, prefix) {
				t.Setenv(k, "")
			}
		}
	}
	for _, m := range regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)`).FindAllStringSubmatch(string(raw), -1) {
		t.Setenv(m[1], "")
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	cfg, err := config.Load(local)
	if err != nil {
		t.Fatalf("%s would not start: %v\nits config:\n%s", name, err, raw)
	}
	return cfg, string(raw)
}

func port(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("listen address %q: %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("listen address %q: %v", addr, err)
	}
	return n
}

// checkPorts: the container ports the Services and probes use are the ones mailhook listens on.
func checkPorts(t *testing.T, component string, c container, cfg config.Config) {
	t.Helper()
	ports := map[string]int{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	want := map[string]int{}
	switch component {
	case "server":
		want["http"] = port(t, cfg.HTTP.Address)
		if cfg.HTTP.AdminAddress != "" {
			want["admin"] = port(t, cfg.HTTP.AdminAddress)
		}
	case "worker":
		for _, e := range c.Env {
			if e.Name == "MAILHOOK_METRICS_ADDRESS" {
				want["metrics"] = port(t, e.Value)
			}
		}
		if len(want) == 0 {
			t.Errorf("the worker has no MAILHOOK_METRICS_ADDRESS: no /metrics, no /healthz to probe")
		}
	case "migrate":
	default:
		t.Errorf("a pod of unknown component %q", component)
	}
	if len(ports) != len(want) {
		t.Errorf("%s: container ports %v, but mailhook listens on %v", component, ports, want)
	}
	for name, p := range want {
		if ports[name] != p {
			t.Errorf("%s: container port %s is %d, but mailhook listens on %d", component, name, ports[name], p)
		}
	}
}

// traceFlush is how long serve.Run gives the trace exporter after everything else stopped.
const traceFlush = 5 * time.Second

// checkGrace: terminationGracePeriodSeconds covers mailhook's own shutdown (serve.Run). The
// server drains its listeners for up to http.shutdown_timeout after its preStop sleep; a worker
// lets activities run for up to worker.stop_timeout. Then the acceptance (server) or the relay
// (worker) ends its starts in flight, each bounded by temporal.start_timeout, and traces flush.
func checkGrace(t *testing.T, component string, pod podSpec, cfg config.Config) {
	t.Helper()
	if component == "migrate" {
		return
	}
	if pod.TerminationGracePeriodSeconds == nil {
		t.Errorf("%s: no terminationGracePeriodSeconds", component)
		return
	}
	grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
	need := cfg.Temporal.StartTimeout + traceFlush
	switch component {
	case "server":
		need += cfg.HTTP.ShutdownTimeout
		if l := pod.Containers[0].Lifecycle; l != nil && l.PreStop != nil && l.PreStop.Sleep != nil {
			need += time.Duration(l.PreStop.Sleep.Seconds) * time.Second
		}
	case "worker":
		need += cfg.Worker.StopTimeout
	}
	if grace < need {
		t.Errorf("%s: terminationGracePeriodSeconds %s, but its shutdown may take %s: the kubelet would kill it mid-way", component, grace, need)
	}
	// More than a minute beyond it only delays rollouts and node drains.
	if grace > need+time.Minute {
		t.Errorf("%s: terminationGracePeriodSeconds %s, far beyond the %s its shutdown takes", component, grace, need)
	}
}

// valueName is a chart value as docs/kubernetes.md writes it: `server.replicas`,
// `temporalTLS.secretName` (config.* are mailhook's own keys, held by internal/config's tests).
var valueName = regexp.MustCompile("`((?:image|secret|temporalTLS|server|workers|migrations|serviceAccount|monitoring|terminationGraceMarginSeconds)(?:\\.[A-Za-z]+)*)`")

// kubectlObject is an object docs/kubernetes.md's commands name: deploy/mailhook-server.
var kubectlObject = regexp.MustCompile(`(?:^|\s)(deploy|svc|job)/(mailhook[a-z-]*)`)

// docs/kubernetes.md names only values the chart has, and its commands only objects the chart
// makes for a release called mailhook: renaming either without the guide fails here.
func TestKubernetesGuideNamesValuesAndObjectsThatExist(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "kubernetes.md"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join("mailhook", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	names := valueName.FindAllStringSubmatch(string(doc), -1)
	if len(names) < 10 {
		t.Fatalf("only %d value names found in docs/kubernetes.md: the pattern no longer matches how it writes them", len(names))
	}
	for _, m := range names {
		var node any = values
		for _, part := range strings.Split(m[1], ".") {
			mp, ok := node.(map[string]any)
			if !ok {
				node = nil
				break
			}
			if node, ok = mp[part]; !ok {
				break
			}
		}
		if node == nil {
			t.Errorf("docs/kubernetes.md names the value %s, which values.yaml does not have", m[1])
		}
	}

	kinds := map[string]string{"deploy": "Deployment", "svc": "Service", "job": "Job"}
	made := map[string]bool{}
	for _, m := range readManifests(t, filepath.Join(rendered(t), "defaults.yaml")) {
		made[m.Kind+"/"+m.Metadata.Name] = true
	}
	objects := kubectlObject.FindAllStringSubmatch(string(doc), -1)
	if len(objects) < 5 {
		t.Fatalf("only %d objects found in docs/kubernetes.md's commands", len(objects))
	}
	for _, m := range objects {
		if !made[kinds[m[1]]+"/"+m[2]] {
			t.Errorf("docs/kubernetes.md names %s/%s, which the chart does not make for a release called mailhook", m[1], m[2])
		}
	}
}

// sizingRow is a row of docs/operations/sizing.md's table of the chart's requests:
// | server (`serve --worker=false`) | 100m | 128Mi | 512Mi | … |
var sizingRow = regexp.MustCompile("(?m)^\\| (server|worker)\\b[^|]*\\| (\\S+) \\| (\\S+) \\| (\\S+) \\|")

// The chart's resource requests are the ones the sizing page derives from its measurements:
// changing either without the other fails here.
func TestResourceRequestsAreTheSizingPages(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations", "sizing.md"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join("mailhook", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	type resources struct {
		Requests struct{ CPU, Memory string } `yaml:"requests"`
		Limits   struct{ Memory string }      `yaml:"limits"`
	}
	var values struct {
		Server  struct{ Resources resources } `yaml:"server"`
		Workers struct{ Resources resources } `yaml:"workers"`
	}
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	rows := sizingRow.FindAllStringSubmatch(string(doc), -1)
	if len(rows) != 2 {
		t.Fatalf("docs/operations/sizing.md: %d rows of the chart's requests found, want server and worker: the pattern no longer matches the table", len(rows))
	}
	for _, m := range rows {
		r := values.Server.Resources
		if m[1] == "worker" {
			r = values.Workers.Resources
		}
		if got := []string{r.Requests.CPU, r.Requests.Memory, r.Limits.Memory}; !slices.Equal(got, m[2:5]) {
			t.Errorf("%s: values.yaml has cpu/memory requests and memory limit %v, docs/operations/sizing.md %v", m[1], got, m[2:5])
		}
	}
}
