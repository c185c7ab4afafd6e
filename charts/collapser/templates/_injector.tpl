{{/*
The injector's name: of its Deployment, Service, ServiceAccount, Secret, RBAC and
MutatingWebhookConfiguration.
*/}}
{{- define "collapser.injectorName" -}}
{{- printf "%s-injector" (include "collapser.fullname" .) | trunc 63 | trimSuffix "-" }}
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
(collapser.sidecarContainer) for these values, rendered without peers and without the
chart's policy, which the injector sets per pod (collapser.io/peers,
collapser.io/policy-configmap), and the values those settings are made from.
*/}}
{{- define "collapser.injectorTemplate" -}}
{{- $values := deepCopy .Values -}}
{{- $_ := set $values.peers "enabled" false -}}
{{- $_ = unset $values.collapser "policy" -}}
{{- $context := dict "Values" $values "Release" .Release "Chart" .Chart "Capabilities" .Capabilities "Template" .Template -}}
clusterDomain: {{ .Values.clusterDomain | quote }}
peerPort: {{ .Values.peers.port }}
policyDir: {{ include "collapser.policyDir" . | quote }}
container:
  {{- include "collapser.sidecarContainer" $context | nindent 2 }}
{{- end }}
