{{/*
The chart name, or nameOverride.
*/}}
{{- define "collapser.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The resource name prefix: fullnameOverride, or release-name (just the release name
when it already contains the chart name). Truncated so suffixed names stay within 63
characters.
*/}}
{{- define "collapser.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Chart name and version for the helm.sh/chart label.
*/}}
{{- define "collapser.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Common labels of every resource.
*/}}
{{- define "collapser.labels" -}}
helm.sh/chart: {{ include "collapser.chart" . }}
{{ include "collapser.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
Selector labels shared by every component; add app.kubernetes.io/component to tell
the components apart.
*/}}
{{- define "collapser.selectorLabels" -}}
app.kubernetes.io/name: {{ include "collapser.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The ServiceAccount of the collapser pods.
*/}}
{{- define "collapser.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "collapser.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
An image reference [registry/]repository:tag[@digest] from {registry, repository, tag,
digest}; the tag defaults to the chart's appVersion. With a digest the runtime pulls
by digest (the tag stays for people reading the spec).
Usage: include "collapser.image" (dict "image" .Values.collapser.image "context" $)
*/}}
{{- define "collapser.image" -}}
{{- $ref := printf "%s:%s" .image.repository (default .context.Chart.AppVersion .image.tag) }}
{{- with .image.registry }}
{{- $ref = printf "%s/%s" . $ref }}
{{- end }}
{{- with .image.digest }}
{{- $ref = printf "%s@%s" $ref . }}
{{- end }}
{{- $ref }}
{{- end }}

{{/*
Selector labels of the collapser pods (sidecar and backend).
*/}}
{{- define "collapser.proxySelectorLabels" -}}
{{ include "collapser.selectorLabels" . }}
app.kubernetes.io/component: proxy
{{- end }}

{{/*
The backend address the sidecar calls: collapser.config.backend, or the loopback
address of backend.port.
*/}}
{{- define "collapser.backendAddress" -}}
{{- default (printf "127.0.0.1:%d" (int .Values.backend.port)) .Values.collapser.config.backend }}
{{- end }}

{{/*
Where the policy ConfigMap is mounted in the sidecar (a directory, so that ConfigMap
updates reach the file; a subPath mount would never see them).
*/}}
{{- define "collapser.policyDir" -}}
/etc/collapser/policy
{{- end }}

{{/*
Where the sidecar reads the release's peer token (the Secret collapser.peerTokenSecret).
*/}}
{{- define "collapser.peerTokenDir" -}}
/etc/collapser/peer-token
{{- end }}

{{/*
The Secret holding the release's peer token, which every call on the peer port must
carry: peers.existingSecret, or the one the chart makes.
*/}}
{{- define "collapser.peerTokenSecret" -}}
{{ .Values.peers.existingSecret | default (printf "%s-peer-token" (include "collapser.fullname" .)) }}
{{- end }}

{{/*
"true" when the sidecars talk to each other over mutual TLS: peers on and peers.tls.enabled.
*/}}
{{- define "collapser.peerTLS" -}}
{{- and (eq (include "collapser.peersEnabled" .) "true") .Values.peers.tls.enabled }}
{{- end }}

{{/*
Where the sidecar reads the release's peer certificate (the Secret collapser.peerTLSSecret).
*/}}
{{- define "collapser.peerTLSDir" -}}
/etc/collapser/peer-tls
{{- end }}

{{/*
The Secret holding the release's peer certificate, key and CA: peers.tls.existingSecret,
or the one the chart makes.
*/}}
{{- define "collapser.peerTLSSecret" -}}
{{ .Values.peers.tls.existingSecret | default (printf "%s-peer-tls" (include "collapser.fullname" .)) }}
{{- end }}

{{/*
"true" when cert-manager issues the peers' certificate.
*/}}
{{- define "collapser.peerCertManager" -}}
{{- and (eq (include "collapser.peerTLS" .) "true") .Values.peers.tls.certManager.enabled (not .Values.peers.tls.existingSecret) }}
{{- end }}

{{/*
The identity cert-manager's peer certificate carries as its URI SAN (a SPIFFE ID).
*/}}
{{- define "collapser.peerSpiffeID" -}}
{{- printf "spiffe://%s/ns/%s/collapser/%s" .Values.clusterDomain .Release.Namespace (include "collapser.fullname" .) }}
{{- end }}

{{/*
The identity every replica's certificate carries as its first DNS SAN: the name of the
release's replicas Service.
*/}}
{{- define "collapser.peerIdentity" -}}
{{- printf "%s.%s.svc" (include "collapser.replicasService" .) .Release.Namespace }}
{{- end }}

{{/*
The Prometheus datasource URL Grafana uses.
*/}}
{{- define "collapser.prometheusUrl" -}}
{{- if .Values.grafana.datasourceUrl }}
{{- .Values.grafana.datasourceUrl }}
{{- else }}
{{- printf "http://%s-prometheus:%d" (include "collapser.fullname" .) (int .Values.prometheus.port) }}
{{- end }}
{{- end }}

{{/*
DNS SRV name of a named port of a headless metrics Service: one record per pod.
Usage: include "collapser.metricsSrv" (dict "service" (include "collapser.metricsService" $) "port" "metrics" "context" $)
*/}}
{{- define "collapser.metricsSrv" -}}
{{- $ctx := .context }}
{{- printf "_%s._tcp.%s.%s.svc.%s" .port .service $ctx.Release.Namespace $ctx.Values.clusterDomain }}
{{- end }}

{{/*
The headless Service of the collapser pods' metrics ports.
*/}}
{{- define "collapser.metricsService" -}}
{{- printf "%s-metrics" (include "collapser.fullname" .) }}
{{- end }}

{{/*
"true" when the sidecars forward collapsed calls to their keys' owners: peers.enabled,
or, when it is null, whether more than one pod can run.
*/}}
{{/*
"true" when the NetworkPolicy renders: networkPolicy.enabled, or, when it is null,
wherever peers are on (the peer port is then kept to the release's own pods).
*/}}
{{- define "collapser.networkPolicyEnabled" -}}
{{- if kindIs "bool" .Values.networkPolicy.enabled }}
{{- .Values.networkPolicy.enabled }}
{{- else }}
{{- include "collapser.peersEnabled" . }}
{{- end }}
{{- end }}

{{- define "collapser.peersEnabled" -}}
{{- if kindIs "bool" .Values.peers.enabled }}
{{- .Values.peers.enabled }}
{{- else }}
{{- include "collapser.severalPods" . }}
{{- end }}
{{- end }}

{{/*
"true" when more than one collapser pod can run: replicaCount above 1, or autoscaling.
*/}}
{{- define "collapser.severalPods" -}}
{{- or (gt (int .Values.replicaCount) 1) .Values.autoscaling.enabled }}
{{- end }}

{{/*
The headless Service that lists every ready collapser pod: the peers' membership,
and where a reader of per-pod counts finds every pod.
*/}}
{{- define "collapser.podsService" -}}
{{- printf "%s-pods" (include "collapser.fullname" .) }}
{{- end }}

{{/*
The headless Service that lists every collapser pod, ready or not
(publishNotReadyAddresses): the replicas each purge is taken to, so that a pod that
is not ready takes it too. Rendered with peers only.
*/}}
{{- define "collapser.replicasService" -}}
{{- printf "%s-replicas" (include "collapser.fullname" .) }}
{{- end }}

{{/*
The gRPC target of a headless Service's peer port, which grpc-go's dns resolver
resolves to the Service's pods.
Usage: include "collapser.peerTarget" (dict "service" (include "collapser.podsService" $) "context" $)
*/}}
{{- define "collapser.peerTarget" -}}
{{- $ctx := .context }}
{{- printf "dns:///%s.%s.svc.%s:%d" .service $ctx.Release.Namespace $ctx.Values.clusterDomain (int $ctx.Values.peers.port) }}
{{- end }}

{{/*
What NOTES says about more than one pod: a port-forward reaches one of them.
*/}}
{{- define "collapser.replicaText" -}}
{{- if eq (include "collapser.severalPods" .) "true" }}
{{- if eq (include "collapser.peersEnabled" .) "true" -}}
With several pods, a port-forward reaches one of them, and so does its count; the {{ ternary "backends" "sidecars" .Values.backend.collapse }}
forward each key's call to the pod that owns it, so the backends' total is what counts:
helm test below sums every pod's count (or ask Prometheus: sum(hello_requests_total)).
{{- else -}}
With several pods and peers.enabled false, each pod collapses on its own: N pods can make N
backend calls for one burst. helm test below sums every pod's count.
{{- end }}
{{- end }}
{{- end }}

{{/*
A container's lifecycle with a native preStop sleep of .seconds, on clusters that
have the sleep action (Kubernetes >= 1.30); nothing otherwise or for 0.
Usage: include "collapser.preStopSleep" (dict "seconds" 5 "context" $)
*/}}
{{- define "collapser.preStopSleep" -}}
{{- if and (gt (int .seconds) 0) (semverCompare ">=1.30-0" .context.Capabilities.KubeVersion.Version) }}
lifecycle:
  preStop:
    sleep:
      seconds: {{ int .seconds }}
{{- end }}
{{- end }}
