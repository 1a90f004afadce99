{{/* Names and labels, as `helm create` makes them. */}}
{{- define "mailhook.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "mailhook.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "mailhook.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "mailhook.labels" -}}
helm.sh/chart: {{ include "mailhook.chart" . }}
{{ include "mailhook.selectorLabels" . }}
app.kubernetes.io/version: {{ include "mailhook.imageTag" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "mailhook.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mailhook.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels of one component (server, worker, migrate): pass (list $ "server"). */}}
{{- define "mailhook.componentLabels" -}}
{{- $ := index . 0 -}}
{{ include "mailhook.labels" $ }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{- define "mailhook.componentSelectorLabels" -}}
{{- $ := index . 0 -}}
{{ include "mailhook.selectorLabels" $ }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{- define "mailhook.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "mailhook.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "mailhook.imageTag" -}}
{{- default .Chart.AppVersion .Values.image.tag }}
{{- end }}

{{- define "mailhook.image" -}}
{{- printf "%s:%s" .Values.image.repository (include "mailhook.imageTag" .) }}
{{- end }}

{{- define "mailhook.secretName" -}}
{{- default (include "mailhook.fullname" .) .Values.secret.existingSecret }}
{{- end }}

{{/* Where the pods find the config file and the Temporal TLS files. */}}
{{- define "mailhook.configDir" -}}/etc/mailhook{{- end }}
{{- define "mailhook.temporalTLSDir" -}}/etc/mailhook/temporal-tls{{- end }}

{{/*
The config file: .Values.config with config.temporal.tls pointed at the files of temporalTLS when
it names a Secret. Every template writes the config through this one, so the ConfigMap, its copy
for the migration hook and the derived values (ports, grace periods, environment) agree.
*/}}
{{- define "mailhook.config" -}}
{{- $config := deepCopy (.Values.config | default dict) -}}
{{- $t := .Values.temporalTLS -}}
{{- if $t.secretName -}}
{{- $temporal := get $config "temporal" | default dict -}}
{{- $tls := get $temporal "tls" | default dict -}}
{{- $_ := set $tls "enabled" true -}}
{{- if or $t.certKey $t.keyKey -}}
{{- if not (and $t.certKey $t.keyKey) -}}
{{- fail "temporalTLS: set both certKey and keyKey (the client certificate and its key), or neither" -}}
{{- end -}}
{{- $_ := set $tls "cert_file" (printf "%s/tls.crt" (include "mailhook.temporalTLSDir" .)) -}}
{{- $_ := set $tls "key_file" (printf "%s/tls.key" (include "mailhook.temporalTLSDir" .)) -}}
{{- end -}}
{{- if $t.caKey -}}
{{- $_ := set $tls "ca_file" (printf "%s/ca.crt" (include "mailhook.temporalTLSDir" .)) -}}
{{- end -}}
{{- if $t.serverName -}}
{{- $_ := set $tls "server_name" $t.serverName -}}
{{- end -}}
{{- $_ := set $temporal "tls" $tls -}}
{{- $_ := set $config "temporal" $temporal -}}
{{- end -}}
{{- toYaml $config -}}
{{- end }}

{{/*
The ${VAR} references of the config file, as JSON {"VAR": true|false}: true when the reference
has a default (${VAR:-...}), so the Secret's key is optional. $VAR without braces expands too
(mailhook uses os.Expand) and is collected the same way.
*/}}
{{- define "mailhook.configVars" -}}
{{- $vars := dict -}}
{{- $text := include "mailhook.config" . -}}
{{- range regexFindAll "\\$\\{[^}]*\\}|\\$[A-Za-z_][A-Za-z0-9_]*" $text -1 -}}
{{- $ref := trimPrefix "$" . | trimPrefix "{" | trimSuffix "}" -}}
{{- $name := regexReplaceAll ":-.*$" $ref "" -}}
{{- if not (regexMatch "^[A-Za-z_][A-Za-z0-9_]*$" $name) -}}
{{- fail (printf "config: %s is not a ${VAR} or ${VAR:-default} reference mailhook can expand" .) -}}
{{- end -}}
{{- $optional := contains ":-" $ref -}}
{{- /* Required once anywhere: required. */ -}}
{{- if hasKey $vars $name -}}
{{- $optional = and $optional (get $vars $name) -}}
{{- end -}}
{{- $_ := set $vars $name $optional -}}
{{- end -}}
{{- toJson $vars -}}
{{- end }}

{{/*
A Go duration (35s, 1m30s, 500ms) in whole seconds, rounded up. Pass (list "key.name" value):
the key names a bad value in the error.
*/}}
{{- define "mailhook.seconds" -}}
{{- $key := index . 0 -}}
{{- $d := toString (index . 1) -}}
{{- $unit := "(ns|us|µs|ms|s|m|h)" -}}
{{- if not (regexMatch (printf "^([0-9]+(\\.[0-9]*)?%s)+$|^0$" $unit) $d) -}}
{{- fail (printf "config.%s %q: write a literal duration such as 35s or 1m30s (the chart derives grace periods from it)" $key $d) -}}
{{- end -}}
{{- $factor := dict "h" 3600.0 "m" 60.0 "s" 1.0 "ms" 0.001 "us" 0.000001 "µs" 0.000001 "ns" 0.000000001 -}}
{{- $total := 0.0 -}}
{{- range regexFindAll (printf "[0-9]+(\\.[0-9]*)?%s" $unit) $d -1 -}}
{{- $num := regexFind "^[0-9]+(\\.[0-9]*)?" . -}}
{{- $total = addf $total (mulf (float64 $num) (get $factor (trimPrefix $num .))) -}}
{{- end -}}
{{- ceil $total | int -}}
{{- end }}

{{/* The port of a listen address (":8000", "0.0.0.0:8000"); fails for one a probe cannot reach. */}}
{{- define "mailhook.port" -}}
{{- $key := index . 0 -}}
{{- $addr := toString (index . 1) -}}
{{- if not (regexMatch "^(|0\\.0\\.0\\.0|\\[::\\]):[0-9]+$" $addr) -}}
{{- fail (printf "config.%s %q: in a pod, listen on every interface with \":<port>\" (the kubelet probes the pod's IP)" $key $addr) -}}
{{- end -}}
{{- regexFind "[0-9]+$" $addr -}}
{{- end }}

{{/* terminationGracePeriodSeconds of the server pods: preStop + http.shutdown_timeout + margin. */}}
{{- define "mailhook.serverGraceSeconds" -}}
{{- $config := include "mailhook.config" . | fromYaml -}}
{{- $http := get $config "http" | default dict -}}
{{- $shutdown := include "mailhook.seconds" (list "http.shutdown_timeout" (get $http "shutdown_timeout" | default "20s")) | int -}}
{{- add (int .Values.server.preStopSleepSeconds) $shutdown (int .Values.terminationGraceMarginSeconds) -}}
{{- end }}

{{/*
terminationGracePeriodSeconds of the worker pods: worker.stop_timeout + margin. An unset or zero
stop_timeout is notify.attempt_timeout (default 30s) + 5s, as mailhook reads it.
*/}}
{{- define "mailhook.workerGraceSeconds" -}}
{{- $config := include "mailhook.config" . | fromYaml -}}
{{- $worker := get $config "worker" | default dict -}}
{{- $notify := get $config "notify" | default dict -}}
{{- $stop := include "mailhook.seconds" (list "worker.stop_timeout" (get $worker "stop_timeout" | default "0")) | int -}}
{{- if eq $stop 0 -}}
{{- $stop = add 5 (include "mailhook.seconds" (list "notify.attempt_timeout" (get $notify "attempt_timeout" | default "30s")) | int) -}}
{{- end -}}
{{- add $stop (int .Values.terminationGraceMarginSeconds) -}}
{{- end }}

{{/* Ports of the server container, from config.http: JSON {"http": N, "admin": N}. */}}
{{- define "mailhook.serverPorts" -}}
{{- $config := include "mailhook.config" . | fromYaml -}}
{{- $http := get $config "http" | default dict -}}
{{- $ports := dict "http" (include "mailhook.port" (list "http.address" (get $http "address" | default ":8000")) | int) -}}
{{- with get $http "admin_address" -}}
{{- $_ := set $ports "admin" (include "mailhook.port" (list "http.admin_address" .) | int) -}}
{{- end -}}
{{- toJson $ports -}}
{{- end }}

{{/* The port name /readyz and /metrics are served on: admin when it is a listener of its own. */}}
{{- define "mailhook.adminPortName" -}}
{{- if hasKey (include "mailhook.serverPorts" . | fromJson) "admin" }}admin{{ else }}http{{ end -}}
{{- end }}

{{/*
The environment every mailhook container gets: the config file, and each ${VAR} of the config
from the Secret (optional when the reference has a default). Variables the component's extraEnv
sets are left to it. Pass (list $ extraEnv secretName).
*/}}
{{- define "mailhook.env" -}}
{{- $ := index . 0 -}}
{{- $extra := index . 1 | default list -}}
{{- $secret := index . 2 -}}
{{- $own := dict -}}
{{- range $extra }}{{ $_ := set $own .name true }}{{ end -}}
- name: MAILHOOK_CONFIG
  value: {{ include "mailhook.configDir" $ }}/mailhook.yaml
{{- $vars := include "mailhook.configVars" $ | fromJson -}}
{{- range $name := keys $vars | sortAlpha }}
{{- if not (hasKey $own $name) }}
- name: {{ $name }}
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: {{ $name }}
      {{- if get $vars $name }}
      optional: true
      {{- end }}
{{- end }}
{{- end }}
{{- with $extra }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Volumes of every mailhook pod: the config, /tmp, and the Temporal TLS files. Pass (list $ configMapName). */}}
{{- define "mailhook.volumes" -}}
{{- $ := index . 0 -}}
- name: config
  configMap:
    name: {{ index . 1 }}
- name: tmp
  emptyDir: {}
{{- with $.Values.temporalTLS }}
{{- if .secretName }}
- name: temporal-tls
  secret:
    secretName: {{ .secretName }}
    items:
      {{- if .certKey }}
      - {key: {{ .certKey | quote }}, path: tls.crt}
      - {key: {{ .keyKey | quote }}, path: tls.key}
      {{- end }}
      {{- if .caKey }}
      - {key: {{ .caKey | quote }}, path: ca.crt}
      {{- end }}
{{- end }}
{{- end }}
{{- end }}

{{- define "mailhook.volumeMounts" -}}
- name: config
  mountPath: {{ include "mailhook.configDir" . }}
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- if .Values.temporalTLS.secretName }}
- name: temporal-tls
  mountPath: {{ include "mailhook.temporalTLSDir" . }}
  readOnly: true
{{- end }}
{{- end }}

{{/* Rolls the pods when the config or the chart's Secret changes. */}}
{{- define "mailhook.checksums" -}}
checksum/config: {{ include "mailhook.config" . | sha256sum }}
{{- if not .Values.secret.existingSecret }}
checksum/secret: {{ toJson .Values.secret.values | sha256sum }}
{{- end }}
{{- end }}

{{/*
With the chart's own Secret, every ${VAR} of the config without a default must be one of its
keys, or set by the extraEnv of every component: otherwise a pod would stop at start-up. Fails
the render naming it.
*/}}
{{- define "mailhook.checkSecret" -}}
{{- if not .Values.secret.existingSecret -}}
{{- $vars := include "mailhook.configVars" . | fromJson -}}
{{- $lists := list .Values.server.extraEnv .Values.workers.extraEnv -}}
{{- if .Values.migrations.enabled }}{{ $lists = append $lists .Values.migrations.extraEnv }}{{ end -}}
{{- $missing := list -}}
{{- range $name := keys $vars | sortAlpha -}}
{{- if and (not (get $vars $name)) (not (hasKey ($.Values.secret.values | default dict) $name)) -}}
{{- $everywhere := true -}}
{{- range $lists -}}
{{- $found := false -}}
{{- range . | default list }}{{ if eq .name $name }}{{ $found = true }}{{ end }}{{ end -}}
{{- $everywhere = and $everywhere $found -}}
{{- end -}}
{{- if not $everywhere }}{{ $missing = append $missing $name }}{{ end -}}
{{- end -}}
{{- end -}}
{{- if $missing -}}
{{- fail (printf "secret.values has no key %s, which the config reads as ${%s}: add it (or each of them), or name a Secret that holds it in secret.existingSecret" (join ", " $missing) (join "}, ${" $missing)) -}}
{{- end -}}
{{- end -}}
{{- end }}
