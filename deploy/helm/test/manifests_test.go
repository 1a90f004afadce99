// Package test checks what the chart renders: every manifest decodes strictly into its
// Kubernetes or Prometheus Operator API type, the objects fit together (selectors, ports, hooks,
// secrets), and the PrometheusRule holds deploy/prometheus/alerts.yml's rules.
//
// scripts/check-helm.sh renders each value set of deploy/helm/mailhook/ci into a directory and
// runs these tests with MAILHOOK_HELM_RENDERED naming it.
package test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// decoder knows exactly the API types the chart may render; EnableStrict makes an unknown or
// duplicated field an error, as `kubectl apply --validate=strict` would.
var decoder = func() runtime.Decoder {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		appsv1.AddToScheme, corev1.AddToScheme, batchv1.AddToScheme, policyv1.AddToScheme,
		autoscalingv2.AddToScheme, monitoringv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
}()

// release is one rendered value set, decoded.
type release struct {
	name    string
	objects []runtime.Object
}

func renderedDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("MAILHOOK_HELM_RENDERED")
	if dir == "" {
		t.Fatal("MAILHOOK_HELM_RENDERED is not set: run scripts/check-helm.sh, which renders the chart's value sets and runs these tests")
	}
	return dir
}

// load decodes every document of one rendered file strictly.
func load(t *testing.T, path string) release {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rel := release{name: strings.TrimSuffix(filepath.Base(path), ".yaml")}
	r := utilyaml.NewYAMLReader(bufio.NewReader(f))
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: document %d: %v", rel.name, i, err)
		}
		if isEmpty(doc) {
			continue
		}
		obj, gvk, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			t.Errorf("%s: document %d (%s) does not decode strictly: %v", rel.name, i, source(doc), err)
			continue
		}
		if gvk.Kind == "" {
			t.Errorf("%s: document %d (%s) has no kind", rel.name, i, source(doc))
		}
		rel.objects = append(rel.objects, obj)
	}
	return rel
}

// isEmpty: a document of comments only (a template whose condition was false).
func isEmpty(doc []byte) bool {
	for line := range strings.SplitSeq(string(doc), "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") && l != "---" {
			return false
		}
	}
	return true
}

// source is the "# Source: ..." line helm template writes above each document.
func source(doc []byte) string {
	for line := range strings.SplitSeq(string(doc), "\n") {
		if s, ok := strings.CutPrefix(line, "# Source: "); ok {
			return s
		}
	}
	return "no source line"
}

func objectsOf[T runtime.Object](rel release) []T {
	var out []T
	for _, o := range rel.objects {
		if v, ok := o.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// expectation says what one value set of deploy/helm/mailhook/ci proves beyond what every set
// must satisfy. A value set without one fails: each says why it is there.
type expectation struct {
	kinds map[string]int
	// external are the Secrets the set expects to exist in the cluster already.
	external []string
	check    func(t *testing.T, rel release)
}

var base = map[string]int{
	"ConfigMap": 2, "Secret": 2, "ServiceAccount": 1, "Service": 3, "Deployment": 2,
	"PodDisruptionBudget": 2, "Job": 1,
}

func with(changes map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range changes {
		out[k] = v
	}
	return out
}

var expectations = map[string]expectation{
	// The defaults with the chart's own Secret: a self-hosted Temporal, no TLS files.
	"defaults": {kinds: base, check: func(t *testing.T, rel release) {
		for _, spec := range podSpecs(rel) {
			if v := volume(spec.spec, "temporal-tls"); v != nil {
				t.Errorf("%s mounts Temporal TLS files without temporalTLS", spec.name)
			}
		}
		// Endpoints are removed while the pod still serves, before it stops accepting.
		c := deployment(t, rel, "server").Spec.Template.Spec.Containers[0]
		if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil || c.Lifecycle.PreStop.Sleep.Seconds != 5 {
			t.Errorf("the server has no 5 s preStop sleep: %+v", c.Lifecycle)
		}
	}},
	// Temporal Cloud with an API key: every pod reads TEMPORAL_API_KEY from the Secret.
	"temporal-cloud-api-key": {kinds: base, check: func(t *testing.T, rel release) {
		for _, spec := range podSpecs(rel) {
			e := env(spec.spec, "TEMPORAL_API_KEY")
			if e == nil || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || ptrTrue(e.ValueFrom.SecretKeyRef.Optional) {
				t.Errorf("%s: TEMPORAL_API_KEY is not a required key of the Secret: %+v", spec.name, e)
			}
		}
	}},
	// Temporal Cloud with mTLS: the client certificate and key of a kubernetes.io/tls Secret.
	"temporal-cloud-mtls": {kinds: base, external: []string{"mailhook-temporal-client"}, check: func(t *testing.T, rel release) {
		wantTLSVolume(t, rel, "mailhook-temporal-client", []corev1.KeyToPath{{Key: "tls.crt", Path: "tls.crt"}, {Key: "tls.key", Path: "tls.key"}})
	}},
	// Secrets from a Secret the operator manages, and a self-hosted Temporal behind TLS with a
	// private CA (no client certificate).
	"existing-secret": {kinds: with(map[string]int{"Secret": 0}), external: []string{"mailhook-secrets", "temporal-ca"}, check: func(t *testing.T, rel release) {
		for _, spec := range podSpecs(rel) {
			for _, c := range spec.spec.Containers {
				for _, e := range c.Env {
					if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name != "mailhook-secrets" {
						t.Errorf("%s: %s reads Secret %q, not the existing one", spec.name, e.Name, e.ValueFrom.SecretKeyRef.Name)
					}
				}
			}
		}
		wantTLSVolume(t, rel, "temporal-ca", []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}})
		if c := deployment(t, rel, "server").Spec.Template.Spec.Containers[0]; c.Lifecycle != nil {
			t.Errorf("a lifecycle hook on Kubernetes 1.28, which has no sleep action: %+v", c.Lifecycle)
		}
	}},
	// The Prometheus Operator's CRDs are served: a ServiceMonitor and the alert rules.
	"monitoring": {kinds: with(map[string]int{"ServiceMonitor": 1, "PrometheusRule": 1}), check: func(t *testing.T, rel release) {
		rules := objectsOf[*monitoringv1.PrometheusRule](rel)
		if len(rules) == 1 {
			wantAlertRules(t, rules[0])
		}
	}},
	// The same values on a cluster without those CRDs: nothing that would fail the install.
	"monitoring-no-api-versions": {kinds: base},
	// HPAs instead of fixed replicas, one listener for everything (no admin Service) and no
	// preStop sleep.
	"autoscaling": {kinds: with(map[string]int{"HorizontalPodAutoscaler": 2, "Service": 2}), check: func(t *testing.T, rel release) {
		for _, d := range objectsOf[*appsv1.Deployment](rel) {
			if d.Spec.Replicas != nil {
				t.Errorf("Deployment %s sets replicas (%d) under an HPA: every upgrade would reset the HPA's choice", d.Name, *d.Spec.Replicas)
			}
			for _, c := range d.Spec.Template.Spec.Containers {
				if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
					t.Errorf("Deployment %s has a preStop hook with server.preStopSleepSeconds 0", d.Name)
				}
			}
		}
	}},
}

func TestRenderedManifests(t *testing.T) {
	dir := renderedDir(t)
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sets, err := filepath.Glob("../mailhook/ci/*-values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Every value set was rendered, and every rendering has its expectation.
	var rendered, want []string
	for _, f := range files {
		rendered = append(rendered, strings.TrimSuffix(filepath.Base(f), ".yaml"))
	}
	for _, s := range sets {
		want = append(want, strings.TrimSuffix(filepath.Base(s), "-values.yaml"))
	}
	for _, w := range want {
		if !slices.Contains(rendered, w) {
			t.Errorf("value set ci/%s-values.yaml was not rendered into %s", w, dir)
		}
	}
	for _, r := range rendered {
		if _, ok := expectations[r]; !ok {
			t.Errorf("rendered %s.yaml has no expectation in manifests_test.go: say what its value set proves", r)
		}
	}
	for name := range expectations {
		if !slices.Contains(rendered, name) {
			t.Errorf("expected a rendering %s.yaml in %s", name, dir)
		}
	}
	for _, f := range files {
		rel := load(t, f)
		exp, ok := expectations[rel.name]
		if !ok {
			continue
		}
		t.Run(rel.name, func(t *testing.T) {
			if got := kinds(rel); !reflect.DeepEqual(got, nonZero(exp.kinds)) {
				t.Errorf("kinds rendered:\n  got  %v\n  want %v", got, nonZero(exp.kinds))
			}
			checkPods(t, rel)
			checkReferences(t, rel, exp.external)
			checkServices(t, rel)
			checkDisruptionBudgets(t, rel)
			checkAutoscalers(t, rel)
			checkMigration(t, rel)
			checkServiceMonitors(t, rel)
			if exp.check != nil {
				exp.check(t, rel)
			}
		})
	}
}

func kinds(rel release) map[string]int {
	out := map[string]int{}
	for _, o := range rel.objects {
		out[o.GetObjectKind().GroupVersionKind().Kind]++
	}
	return out
}

func nonZero(m map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

type podSpec struct {
	name string
	spec corev1.PodSpec
	meta metav1.ObjectMeta
}

func podSpecs(rel release) []podSpec {
	var out []podSpec
	for _, d := range objectsOf[*appsv1.Deployment](rel) {
		out = append(out, podSpec{"Deployment " + d.Name, d.Spec.Template.Spec, d.Spec.Template.ObjectMeta})
	}
	for _, j := range objectsOf[*batchv1.Job](rel) {
		out = append(out, podSpec{"Job " + j.Name, j.Spec.Template.Spec, j.Spec.Template.ObjectMeta})
	}
	return out
}

func deployment(t *testing.T, rel release, component string) *appsv1.Deployment {
	t.Helper()
	for _, d := range objectsOf[*appsv1.Deployment](rel) {
		if d.Spec.Template.Labels["app.kubernetes.io/component"] == component {
			return d
		}
	}
	t.Fatalf("no Deployment of component %s", component)
	return nil
}

// checkPods: what each mailhook pod must have, whatever the values.
func checkPods(t *testing.T, rel release) {
	server, worker := deployment(t, rel, "server"), deployment(t, rel, "worker")
	wantArgs(t, server, "serve", "--worker=false")
	wantArgs(t, worker, "worker")
	for _, j := range objectsOf[*batchv1.Job](rel) {
		if c := j.Spec.Template.Spec.Containers; len(c) != 1 || !slices.Equal(c[0].Args, []string{"migrate"}) {
			t.Errorf("Job %s does not run exactly `mailhook migrate`", j.Name)
		}
	}
	for _, d := range []*appsv1.Deployment{server, worker} {
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("Deployment %s: its selector does not match its pods (%v)", d.Name, err)
		}
		if d.Spec.Template.Spec.TerminationGracePeriodSeconds == nil {
			t.Errorf("Deployment %s: no terminationGracePeriodSeconds (the kubelet's 30 s would cut mailhook's shutdown)", d.Name)
		}
		c := d.Spec.Template.Spec.Containers[0]
		for probe, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
			if p == nil || p.HTTPGet == nil {
				t.Errorf("Deployment %s: no HTTP %s probe", d.Name, probe)
				continue
			}
			if !hasPort(c, p.HTTPGet.Port.String()) {
				t.Errorf("Deployment %s: the %s probe's port %s is not a port of the container", d.Name, probe, p.HTTPGet.Port.String())
			}
		}
		if c.LivenessProbe != nil && c.LivenessProbe.HTTPGet != nil && c.LivenessProbe.HTTPGet.Path != "/healthz" {
			t.Errorf("Deployment %s: liveness on %s, want /healthz", d.Name, c.LivenessProbe.HTTPGet.Path)
		}
	}
	if p := server.Spec.Template.Spec.Containers[0].ReadinessProbe; p != nil && p.HTTPGet != nil && p.HTTPGet.Path != "/readyz" {
		t.Errorf("server readiness on %s, want /readyz", p.HTTPGet.Path)
	}
	for _, ps := range podSpecs(rel) {
		sc := ps.spec.SecurityContext
		if sc == nil || !ptrTrue(sc.RunAsNonRoot) {
			t.Errorf("%s: the pod may run as root", ps.name)
		}
		for _, c := range ps.spec.Containers {
			csc := c.SecurityContext
			if csc == nil || !ptrTrue(csc.ReadOnlyRootFilesystem) || csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation {
				t.Errorf("%s: container %s lacks a read-only root filesystem or allows privilege escalation", ps.name, c.Name)
			}
			if csc != nil && (csc.Capabilities == nil || !slices.Contains(csc.Capabilities.Drop, "ALL")) {
				t.Errorf("%s: container %s keeps its capabilities", ps.name, c.Name)
			}
			if c.Image == "" || strings.HasSuffix(c.Image, ":") {
				t.Errorf("%s: container %s has no image tag: %q", ps.name, c.Name, c.Image)
			}
			if env(ps.spec, "MAILHOOK_CONFIG") == nil {
				t.Errorf("%s: no MAILHOOK_CONFIG", ps.name)
			}
			if !mounted(c, "/tmp") {
				t.Errorf("%s: container %s has a read-only root filesystem and no writable /tmp", ps.name, c.Name)
			}
		}
		if ps.spec.AutomountServiceAccountToken == nil || *ps.spec.AutomountServiceAccountToken {
			t.Errorf("%s: mounts a service account token mailhook never uses", ps.name)
		}
	}
}

func wantArgs(t *testing.T, d *appsv1.Deployment, args ...string) {
	t.Helper()
	if got := d.Spec.Template.Spec.Containers[0].Args; len(got) < len(args) || !slices.Equal(got[:len(args)], args) {
		t.Errorf("Deployment %s runs %v, want mailhook %s", d.Name, got, strings.Join(args, " "))
	}
}

func hasPort(c corev1.Container, name string) bool {
	return slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == name || fmt.Sprint(p.ContainerPort) == name })
}

func mounted(c corev1.Container, path string) bool {
	return slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == path })
}

func env(spec corev1.PodSpec, name string) *corev1.EnvVar {
	for _, c := range spec.Containers {
		for i := range c.Env {
			if c.Env[i].Name == name {
				return &c.Env[i]
			}
		}
	}
	return nil
}

func volume(spec corev1.PodSpec, name string) *corev1.Volume {
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name {
			return &spec.Volumes[i]
		}
	}
	return nil
}

func ptrTrue(b *bool) bool { return b != nil && *b }

// checkReferences: every ConfigMap and Secret a pod reads is rendered by the same release (a
// hook's from a hook that runs before it) or is one the value set expects to exist already,
// and every volume a container mounts is declared.
func checkReferences(t *testing.T, rel release, external []string) {
	configMaps := map[string]metav1.ObjectMeta{}
	for _, cm := range objectsOf[*corev1.ConfigMap](rel) {
		configMaps[cm.Name] = cm.ObjectMeta
	}
	secrets := map[string]metav1.ObjectMeta{}
	for _, s := range objectsOf[*corev1.Secret](rel) {
		secrets[s.Name] = s.ObjectMeta
	}
	for _, ps := range podSpecs(rel) {
		hook := ps.name[:3] == "Job"
		var jobMeta metav1.ObjectMeta
		for _, j := range objectsOf[*batchv1.Job](rel) {
			if "Job "+j.Name == ps.name {
				jobMeta = j.ObjectMeta
			}
		}
		ref := func(kind, name string, known map[string]metav1.ObjectMeta, optional bool) {
			m, ok := known[name]
			switch {
			case !ok && slices.Contains(external, name), !ok && optional:
			case !ok:
				t.Errorf("%s reads %s %q, which this release does not make", ps.name, kind, name)
			case hook && !hookBefore(m, jobMeta):
				t.Errorf("%s (a hook) reads %s %q, which is not a hook made before it: it does not exist yet on the first install", ps.name, kind, name)
			case !hook && m.Annotations["helm.sh/hook"] != "":
				t.Errorf("%s reads %s %q, a hook object deleted once the hook succeeded", ps.name, kind, name)
			}
		}
		for _, v := range ps.spec.Volumes {
			switch {
			case v.ConfigMap != nil:
				ref("ConfigMap", v.ConfigMap.Name, configMaps, ptrTrue(v.ConfigMap.Optional))
			case v.Secret != nil:
				ref("Secret", v.Secret.SecretName, secrets, ptrTrue(v.Secret.Optional))
			}
		}
		for _, c := range ps.spec.Containers {
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					r := e.ValueFrom.SecretKeyRef
					ref("Secret", r.Name, secrets, false)
					if s, ok := objectByName[*corev1.Secret](rel, r.Name); ok && !ptrTrue(r.Optional) {
						if _, has := s.StringData[r.Key]; !has {
							if _, has := s.Data[r.Key]; !has {
								t.Errorf("%s: %s reads key %q, which Secret %s lacks", ps.name, e.Name, r.Key, r.Name)
							}
						}
					}
				}
			}
			for _, m := range c.VolumeMounts {
				if volume(ps.spec, m.Name) == nil {
					t.Errorf("%s: container %s mounts an undeclared volume %s", ps.name, c.Name, m.Name)
				}
			}
		}
	}
}

func objectByName[T interface {
	runtime.Object
	GetName() string
}](rel release, name string) (T, bool) {
	for _, o := range objectsOf[T](rel) {
		if o.GetName() == name {
			return o, true
		}
	}
	var zero T
	return zero, false
}

// hookBefore: m is a hook of every event job is, with a lower weight.
func hookBefore(m, job metav1.ObjectMeta) bool {
	events := strings.Split(m.Annotations["helm.sh/hook"], ",")
	for _, e := range strings.Split(job.Annotations["helm.sh/hook"], ",") {
		if !slices.Contains(events, e) {
			return false
		}
	}
	var mw, jw int
	fmt.Sscan(m.Annotations["helm.sh/hook-weight"], &mw)
	fmt.Sscan(job.Annotations["helm.sh/hook-weight"], &jw)
	return mw < jw
}

// checkServices: each Service selects the pods of one Deployment, on ports they have.
func checkServices(t *testing.T, rel release) {
	for _, s := range objectsOf[*corev1.Service](rel) {
		d := selectedDeployment(t, rel, "Service "+s.Name, labels.SelectorFromSet(s.Spec.Selector))
		if d == nil {
			continue
		}
		for _, p := range s.Spec.Ports {
			if !hasPort(d.Spec.Template.Spec.Containers[0], p.TargetPort.String()) {
				t.Errorf("Service %s: targetPort %s is not a port of Deployment %s", s.Name, p.TargetPort.String(), d.Name)
			}
		}
	}
}

// selectedDeployment is the one Deployment whose pods sel matches.
func selectedDeployment(t *testing.T, rel release, who string, sel labels.Selector) *appsv1.Deployment {
	t.Helper()
	if sel.Empty() {
		t.Errorf("%s selects every pod of the namespace", who)
		return nil
	}
	var found []*appsv1.Deployment
	for _, d := range objectsOf[*appsv1.Deployment](rel) {
		if sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			found = append(found, d)
		}
	}
	if len(found) != 1 {
		t.Errorf("%s selects the pods of %d Deployments, want 1", who, len(found))
		return nil
	}
	return found[0]
}

func checkDisruptionBudgets(t *testing.T, rel release) {
	covered := map[string]bool{}
	for _, p := range objectsOf[*policyv1.PodDisruptionBudget](rel) {
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if err != nil {
			t.Errorf("PodDisruptionBudget %s: %v", p.Name, err)
			continue
		}
		if d := selectedDeployment(t, rel, "PodDisruptionBudget "+p.Name, sel); d != nil {
			covered[d.Name] = true
		}
		if p.Spec.MinAvailable != nil {
			t.Errorf("PodDisruptionBudget %s sets minAvailable: with one replica it blocks every node drain", p.Name)
		}
	}
	for _, d := range objectsOf[*appsv1.Deployment](rel) {
		if !covered[d.Name] {
			t.Errorf("Deployment %s has no PodDisruptionBudget", d.Name)
		}
	}
}

func checkAutoscalers(t *testing.T, rel release) {
	for _, h := range objectsOf[*autoscalingv2.HorizontalPodAutoscaler](rel) {
		ref := h.Spec.ScaleTargetRef
		d, ok := objectByName[*appsv1.Deployment](rel, ref.Name)
		if ref.Kind != "Deployment" || ref.APIVersion != "apps/v1" || !ok {
			t.Errorf("HorizontalPodAutoscaler %s scales %s %s, not a Deployment of this release", h.Name, ref.Kind, ref.Name)
			continue
		}
		if d.Spec.Replicas != nil {
			t.Errorf("Deployment %s sets replicas beside HorizontalPodAutoscaler %s", d.Name, h.Name)
		}
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 1 || h.Spec.MaxReplicas < *h.Spec.MinReplicas {
			t.Errorf("HorizontalPodAutoscaler %s: replicas %v..%d", h.Name, h.Spec.MinReplicas, h.Spec.MaxReplicas)
		}
	}
}

// checkMigration: `mailhook migrate` runs before the release's pods on install and upgrade.
func checkMigration(t *testing.T, rel release) {
	jobs := objectsOf[*batchv1.Job](rel)
	if len(jobs) != 1 {
		t.Errorf("%d migration Jobs, want 1", len(jobs))
		return
	}
	j := jobs[0]
	events := strings.Split(j.Annotations["helm.sh/hook"], ",")
	sort.Strings(events)
	if !slices.Equal(events, []string{"pre-install", "pre-upgrade"}) {
		t.Errorf("Job %s hooks %v, want pre-install and pre-upgrade", j.Name, events)
	}
	if j.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("Job %s: restartPolicy %s, want Never (the Job's backoffLimit retries)", j.Name, j.Spec.Template.Spec.RestartPolicy)
	}
	if j.Spec.ActiveDeadlineSeconds == nil {
		t.Errorf("Job %s has no activeDeadlineSeconds: a migration that hangs holds the upgrade until helm's timeout", j.Name)
	}
}

// checkServiceMonitors: the ServiceMonitor scrapes /metrics of the server and the worker pods.
func checkServiceMonitors(t *testing.T, rel release) {
	for _, sm := range objectsOf[*monitoringv1.ServiceMonitor](rel) {
		sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
		if err != nil {
			t.Errorf("ServiceMonitor %s: %v", sm.Name, err)
			continue
		}
		scraped := map[string]bool{} // components
		for _, ep := range sm.Spec.Endpoints {
			if ep.Path != "/metrics" {
				t.Errorf("ServiceMonitor %s scrapes %s", sm.Name, ep.Path)
			}
			for _, s := range objectsOf[*corev1.Service](rel) {
				if !sel.Matches(labels.Set(s.Labels)) {
					continue
				}
				for _, p := range s.Spec.Ports {
					if p.Name == ep.Port {
						scraped[s.Spec.Selector["app.kubernetes.io/component"]] = true
					}
				}
			}
		}
		if !scraped["server"] || !scraped["worker"] {
			t.Errorf("ServiceMonitor %s scrapes components %v, want server and worker", sm.Name, scraped)
		}
	}
}

func wantTLSVolume(t *testing.T, rel release, secret string, items []corev1.KeyToPath) {
	t.Helper()
	for _, ps := range podSpecs(rel) {
		v := volume(ps.spec, "temporal-tls")
		if v == nil || v.Secret == nil || v.Secret.SecretName != secret {
			t.Errorf("%s: no temporal-tls volume of Secret %s: %+v", ps.name, secret, v)
			continue
		}
		if !reflect.DeepEqual(v.Secret.Items, items) {
			t.Errorf("%s: temporal-tls items %+v, want %+v", ps.name, v.Secret.Items, items)
		}
		for _, c := range ps.spec.Containers {
			if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "temporal-tls" }) {
				t.Errorf("%s: container %s does not mount temporal-tls", ps.name, c.Name)
			}
		}
	}
}

// alertsFile is what Prometheus loads outside Kubernetes (docker compose's monitoring profile)
// and what promtool's rule tests check.
const alertsFile = "../../prometheus/alerts.yml"

// wantAlertRules: the PrometheusRule holds exactly alerts.yml's groups, so an alert changed or
// added there reaches Kubernetes users too.
func wantAlertRules(t *testing.T, rule *monitoringv1.PrometheusRule) {
	t.Helper()
	raw, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var want monitoringv1.PrometheusRuleSpec
	if err := yaml.UnmarshalStrict(raw, &want); err != nil {
		t.Fatalf("%s does not decode as a PrometheusRule's spec: %v", alertsFile, err)
	}
	if len(want.Groups) == 0 || len(want.Groups[0].Rules) == 0 {
		t.Fatalf("%s has no rules", alertsFile)
	}
	if diff := firstDifference(want, rule.Spec); diff != "" {
		t.Errorf("PrometheusRule %s differs from %s (copy it over deploy/helm/mailhook/files/alerts.yml): %s", rule.Name, alertsFile, diff)
	}
}

// firstDifference names the first line where a and b, as YAML, differ; "" when equal.
func firstDifference(a, b any) string {
	if reflect.DeepEqual(a, b) {
		return ""
	}
	ya, _ := yaml.Marshal(a)
	yb, _ := yaml.Marshal(b)
	la, lb := strings.Split(string(ya), "\n"), strings.Split(string(yb), "\n")
	for i := 0; i < max(len(la), len(lb)); i++ {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y {
			return fmt.Sprintf("line %d: alerts.yml has %q, the chart %q", i+1, x, y)
		}
	}
	if !bytes.Equal(ya, yb) {
		return "they differ"
	}
	return "they differ in a way YAML does not show"
}
