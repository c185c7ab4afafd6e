{{/*
The injector's name: of its Deployment, Service, ServiceAccount, Secret, RBAC and
MutatingWebhookConfiguration.
*/}}
{{- define "collapser.injectorName" -}}
{{- printf "%s-injector" (include "collapser.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The Secret of the injector's serving certificate: written by the injector itself, or
by cert-manager with injector.certManager.enabled.
*/}}
{{- define "collapser.injectorSecret" -}}
{{- printf "%s-tls" (include "collapser.injectorName" .) }}
{{- end }}

{{/*
The Secret of the CA of injected workloads' peer certificates, which the injector keeps.
*/}}
{{- define "collapser.injectorPeerCASecret" -}}
{{- printf "%s-peer-ca" (include "collapser.injectorName" .) }}
{{- end }}

{{/*
The DNS names the API server may call the injector's Service by: the serving
certificate's names, the same list the injector checks a certificate against
(src/cmd/collapser-injector, settings.dnsNames).
*/}}
{{- define "collapser.injectorDNSNames" -}}
{{- $name := include "collapser.injectorName" . -}}
- {{ printf "%s.%s.svc" $name .Release.Namespace }}
- {{ printf "%s.%s" $name .Release.Namespace }}
- {{ $name }}
{{- end }}

{{/*
"true" when cert-manager issues the injector's certificate.
*/}}
{{- define "collapser.injectorCertManager" -}}
{{- and .Values.injector.enabled .Values.injector.certManager.enabled }}
{{- end }}

{{/*
The issuer of the injector's serving certificate: injector.certManager.issuerRef, or
the release's own CA Issuer (injector-issuer.yaml).
*/}}
{{- define "collapser.injectorIssuerRef" -}}
{{- with .Values.injector.certManager.issuerRef }}
{{- toYaml . }}
{{- else -}}
name: {{ include "collapser.injectorName" . }}-ca
kind: Issuer
group: cert-manager.io
{{- end }}
{{- end }}

{{/*
Fails unless the cluster serves cert-manager's Certificate: the message names the setting
that asked for it and says how to get it, or how to render without a cluster.
Usage: include "collapser.requireCertManager" (dict "setting" "injector.certManager.enabled" "context" $)
*/}}
{{- define "collapser.requireCertManager" -}}
{{- if not (.context.Capabilities.APIVersions.Has "cert-manager.io/v1/Certificate") }}
{{- fail (printf "%s: the cluster has no cert-manager.io/v1 Certificate; install cert-manager first (helm template: pass --api-versions cert-manager.io/v1/Certificate)" .setting) }}
{{- end }}
{{- end }}

{{/*
The headless Service of the injector pods' metrics port, which the chart's Prometheus
finds them through.
*/}}
{{- define "collapser.injectorMetricsService" -}}
{{- printf "%s-metrics" (include "collapser.injectorName" .) }}
{{- end }}

{{/*
Selector labels of the injector pods.
*/}}
{{- define "collapser.injectorSelectorLabels" -}}
{{ include "collapser.selectorLabels" . }}
app.kubernetes.io/component: injector
{{- end }}

{{/*
The sidecar template the injector reads: the chart's own sidecar container
(collapser.sidecarContainer) for these values, rendered without peers, without the
chart's policy and without TLS to callers or to the backend (its probes stay gRPC),
which the injector sets per pod (collapser.io/peers, collapser.io/policy-configmap,
collapser.io/tls-secret, collapser.io/backend-tls), and the values those settings are
made from.
*/}}
{{- define "collapser.injectorTemplate" -}}
{{- $values := deepCopy .Values -}}
{{- $_ := set $values.peers "enabled" false -}}
{{- $_ = unset $values.collapser "policy" -}}
{{- range list "tlsCertFile" "tlsKeyFile" "tlsClientCaFile" "backendTls" "backendTlsCaFile" "backendTlsServerName" "backendTlsCertFile" "backendTlsKeyFile" }}
{{- $_ = unset $values.collapser.config . -}}
{{- end -}}
{{- if .Values.injector.adminSocket }}
{{- $_ = set $values.collapser.config "adminListen" "unix:/var/run/collapser/admin.sock" -}}
{{- end -}}
{{- $context := dict "Values" $values "Release" .Release "Chart" .Chart "Capabilities" .Capabilities "Template" .Template -}}
clusterDomain: {{ .Values.clusterDomain | quote }}
peerPort: {{ .Values.peers.port }}
policyDir: {{ include "collapser.policyDir" . | quote }}
peerTokenDir: {{ include "collapser.peerTokenDir" . | quote }}
peerTlsDir: {{ include "collapser.peerTLSDir" . | quote }}
container:
  {{- include "collapser.sidecarContainer" $context | nindent 2 }}
{{- end }}
