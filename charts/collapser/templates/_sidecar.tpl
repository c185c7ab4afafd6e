{{/*
The sidecar container: the one spec of the collapser container, rendered into the
chart's own Deployment (and, for the injector, wherever a sidecar is put in front of a
workload). Its settings come from collapser.config, one COLLAPSER_* variable per key
(the key in upper snake case: cacheTTL is COLLAPSER_CACHE_TTL); a list is joined with
commas. The ports come from collapser.ports; a gRPC probe without a port probes the
gRPC port. The root context is its argument.
*/}}
{{- define "collapser.sidecarContainer" -}}
{{- $ports := .Values.collapser.ports -}}
name: collapser
image: {{ include "collapser.image" (dict "image" .Values.collapser.image "context" .) | quote }}
imagePullPolicy: {{ .Values.collapser.image.pullPolicy }}
ports:
  - name: grpc
    containerPort: {{ $ports.grpc }}
    protocol: TCP
  - name: metrics
    containerPort: {{ $ports.metrics }}
    protocol: TCP
  {{- if eq (include "collapser.peersEnabled" .) "true" }}
  - name: peer
    containerPort: {{ .Values.peers.port }}
    protocol: TCP
  {{- end }}
env:
  {{- include "collapser.sidecarEnv" (dict "context" . "container" "collapser") | nindent 2 }}
livenessProbe:
  {{- include "collapser.grpcProbe" (dict "probe" .Values.collapser.livenessProbe "port" $ports.grpc "metricsPort" $ports.metrics "tls" .Values.collapser.config.tlsCertFile) | nindent 2 }}
readinessProbe:
  {{- include "collapser.grpcProbe" (dict "probe" .Values.collapser.readinessProbe "port" $ports.grpc "metricsPort" $ports.metrics "tls" .Values.collapser.config.tlsCertFile) | nindent 2 }}
{{- include "collapser.preStopSleep" (dict "seconds" .Values.collapser.preStopSleepSeconds "context" .) }}
resources:
  {{- toYaml .Values.collapser.resources | nindent 2 }}
securityContext:
  {{- toYaml .Values.securityContext | nindent 2 }}
{{- with include "collapser.sidecarVolumeMounts" . | trim }}
volumeMounts:
  {{- . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
A probe as YAML: a gRPC probe that names no port probes the given one.
*/}}
{{- define "collapser.grpcProbe" -}}
{{- $probe := deepCopy .probe -}}
{{- if and (hasKey $probe "grpc") .tls -}}
{{- /* The kubelet's gRPC probe speaks plain text: a listener that serves TLS is
asked through the metrics port, which answers for the same health service. */}}
{{- $path := ternary "/livez" "/readyz" (eq ($probe.grpc.service | default "") "liveness") -}}
{{- $_ := set $probe "httpGet" (dict "path" $path "port" (int .metricsPort)) -}}
{{- $_ := unset $probe "grpc" -}}
{{- else if and (hasKey $probe "grpc") (not $probe.grpc.port) -}}
{{- $_ := set $probe.grpc "port" (int .port) -}}
{{- end -}}
{{- toYaml $probe -}}
{{- end }}

{{/*
The sidecar's OTEL_* variables from the tracing values, none while tracing.endpoint is
empty; an empty value leaves its variable to the sidecar's default. The pod's name and
namespace are always resource attributes. Its argument is .Values.tracing.
*/}}
{{- define "collapser.tracingEnv" -}}
{{- if .endpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ .endpoint | quote }}
{{- with .sampler }}
- name: OTEL_TRACES_SAMPLER
  value: {{ . | quote }}
{{- end }}
{{- if ne (toString .samplerArg) "" }}
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ .samplerArg | toString | quote }}
{{- end }}
{{- with .serviceName }}
- name: OTEL_SERVICE_NAME
  value: {{ . | quote }}
{{- end }}
{{- with .maxQueueSize }}
- name: OTEL_BSP_MAX_QUEUE_SIZE
  value: {{ . | int64 | quote }}
{{- end }}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: OTEL_RESOURCE_ATTRIBUTES
  value: {{ include "collapser.resourceAttributes" .resourceAttributes | quote }}
{{- end }}
{{- end }}

{{/*
OTEL_RESOURCE_ATTRIBUTES: the pod's name and namespace (expanded by the kubelet from
POD_NAME and POD_NAMESPACE), then the given attributes, key=value, comma-separated.
*/}}
{{- define "collapser.resourceAttributes" -}}
k8s.pod.name=$(POD_NAME),k8s.namespace.name=$(POD_NAMESPACE)
{{- range $key, $value := . }},{{ $key }}={{ $value }}{{ end }}
{{- end }}

{{/*
The sidecar's settings as the variables of a container: the collapser container, or
the hello backend's when it collapses with the library (backend.collapse), which reads
the same COLLAPSER_* variables. Its argument: dict "context" (the root context) and
"container" (the container's name, whose memory limit COLLAPSER_MEMORY_LIMIT is).
*/}}
{{- define "collapser.sidecarEnv" -}}
{{- $ctx := .context -}}
{{- $ports := $ctx.Values.collapser.ports -}}
- name: COLLAPSER_LISTEN
  value: {{ printf ":%d" (int $ports.grpc) | quote }}
- name: COLLAPSER_METRICS_LISTEN
  value: {{ printf ":%d" (int $ports.metrics) | quote }}
{{- range $key, $value := $ctx.Values.collapser.config }}
- name: {{ printf "COLLAPSER_%s" (snakecase $key | upper) }}
  {{- if eq $key "backend" }}
  value: {{ include "collapser.backendAddress" $ctx | quote }}
  {{- else if kindIs "slice" $value }}
  value: {{ join "," $value | quote }}
  {{- else if and (kindIs "float64" $value) (eq $value (floor $value)) }}
  {{- /* a YAML integer, which Helm reads as a float: 67108864, not 6.7108864e+07 */}}
  value: {{ $value | int64 | quote }}
  {{- else }}
  value: {{ $value | toString | quote }}
  {{- end }}
{{- end }}
{{- if eq (include "collapser.peersEnabled" $ctx) "true" }}
- name: COLLAPSER_PEERS
  value: {{ include "collapser.peerTarget" (dict "service" (include "collapser.podsService" $ctx) "context" $ctx) | quote }}
- name: COLLAPSER_REPLICAS
  value: {{ include "collapser.peerTarget" (dict "service" (include "collapser.replicasService" $ctx) "context" $ctx) | quote }}
- name: COLLAPSER_PEER_LISTEN
  value: {{ printf ":%d" (int $ctx.Values.peers.port) | quote }}
- name: COLLAPSER_PEER_TOKEN_FILE
  value: {{ printf "%s/token" (include "collapser.peerTokenDir" $ctx) | quote }}
{{- end }}
{{- if eq (include "collapser.peerTLS" $ctx) "true" }}
{{- $dir := include "collapser.peerTLSDir" $ctx }}
- name: COLLAPSER_PEER_TLS_CERT_FILE
  value: {{ printf "%s/tls.crt" $dir | quote }}
- name: COLLAPSER_PEER_TLS_KEY_FILE
  value: {{ printf "%s/tls.key" $dir | quote }}
- name: COLLAPSER_PEER_TLS_CA_FILE
  value: {{ printf "%s/ca.crt" $dir | quote }}
{{- else if eq (include "collapser.peersEnabled" $ctx) "true" }}
{{- /* peers.tls.enabled=false: the sidecar refuses peers in plain text unless told. */}}
- name: COLLAPSER_PEER_PLAINTEXT
  value: "true"
{{- end }}
{{- if $ctx.Values.collapser.policy }}
- name: COLLAPSER_POLICY_FILE
  value: {{ printf "%s/policy.yaml" (include "collapser.policyDir" $ctx) | quote }}
{{- end }}
- name: COLLAPSER_MEMORY_LIMIT
  valueFrom:
    resourceFieldRef:
      containerName: {{ .container }}
      resource: limits.memory
{{- with $ctx.Values.collapser.gogc }}
- name: GOGC
  value: {{ . | quote }}
{{- end }}
{{- with include "collapser.tracingEnv" $ctx.Values.tracing | trim }}
{{ . }}
{{- end }}
{{- with $ctx.Values.collapser.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
The mounts of the files the sidecar's settings name (the policy, the peer token and
certificate) and collapser.extraVolumeMounts, as a list; empty when none. Its argument
is the root context.
*/}}
{{- define "collapser.sidecarVolumeMounts" -}}
{{- $peers := eq (include "collapser.peersEnabled" .) "true" }}
{{- if .Values.collapser.policy }}
- name: policy
  mountPath: {{ include "collapser.policyDir" . }}
  readOnly: true
{{- end }}
{{- if $peers }}
- name: peer-token
  mountPath: {{ include "collapser.peerTokenDir" . }}
  readOnly: true
{{- end }}
{{- if eq (include "collapser.peerTLS" .) "true" }}
- name: peer-tls
  mountPath: {{ include "collapser.peerTLSDir" . }}
  readOnly: true
{{- end }}
{{- with .Values.collapser.extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end }}
