{{/*
Names and labels (docs/platform-notes.md "Helm charts": selectors use name + instance + component only, never
version or chart, because a selector is immutable).
*/}}
{{- define "mailmesh.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "mailmesh.fullname" -}}
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

{{- define "mailmesh.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object; pass the root context. */}}
{{- define "mailmesh.labels" -}}
helm.sh/chart: {{ include "mailmesh.chart" . }}
{{ include "mailmesh.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: mailmesh
{{- end }}

{{- define "mailmesh.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mailmesh.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* A component's objects: (dict "root" $ "name" "archive"). */}}
{{- define "mailmesh.componentLabels" -}}
{{ include "mailmesh.labels" .root }}
app.kubernetes.io/component: {{ .name }}
{{- end }}

{{- define "mailmesh.componentSelector" -}}
{{ include "mailmesh.selectorLabels" .root }}
app.kubernetes.io/component: {{ .name }}
{{- end }}

{{- define "mailmesh.componentName" -}}
{{- printf "%s-%s" (include "mailmesh.fullname" .root) .name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "mailmesh.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if hasPrefix "sha256:" $tag }}
{{- printf "%s@%s" .Values.image.repository $tag }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{/*
The gRPC address callers use for service .name. A Deployment: its headless Service as a gRPC dns: target,
`dns:///<component>-headless.<namespace>.svc:<port>`, which resolves to every ready pod, so callers balance
per call (round_robin) instead of kube-proxy per connection, and the health and subscription services find
every instance (meshcore.discovery; docs/reliability.md). The name is completed by the pod's resolv.conf
search list (cluster domain), which gRPC's c-ares resolver and getaddrinfo both apply. A StatefulSet: every
replica by its own DNS name under its headless Service (the health service counts each edge peer's Waku
peers, and send/subscription publish through and listen to each one: services/health/README.md).
*/}}
{{- define "mailmesh.address" -}}
{{- $svc := index .root.Values.services .name }}
{{- if $svc.enabled }}
{{- $host := include "mailmesh.componentName" . }}
{{- if eq $svc.workload "StatefulSet" }}
{{- $pods := list }}
{{- range $i := until (int (include "mailmesh.replicas" (dict "root" .root "name" .name))) }}
{{- $pods = append $pods (printf "%s-%d.%s:%d" $host $i $host (int $svc.grpcPort)) }}
{{- end }}
{{- join "," $pods }}
{{- else }}
{{- printf "dns:///%s-headless.%s.svc:%d" $host .root.Release.Namespace (int $svc.grpcPort) }}
{{- end }}
{{- end }}
{{- end }}

{{/* Replicas after the single-node rules: the embedded SQLite stores allow one writer process per file. */}}
{{- define "mailmesh.replicas" -}}
{{- $svc := index .root.Values.services .name }}
{{- if and (eq .root.Values.storage.backend "sqlite") (ne $svc.store "none") }}1{{ else }}{{ $svc.replicas }}{{ end }}
{{- end }}

{{- define "mailmesh.autoscaled" -}}
{{- $svc := index .root.Values.services .name }}
{{- $single := and (eq .root.Values.storage.backend "sqlite") (ne $svc.store "none") }}
{{- if and $svc.autoscaling.enabled (eq $svc.workload "Deployment") (not $single) }}true{{ end }}
{{- end }}

{{- define "mailmesh.cassandraSecret" -}}
{{- default (printf "%s-cassandra" (include "mailmesh.fullname" .)) .Values.storage.cassandra.existingSecret }}
{{- end }}

{{- define "mailmesh.cursorSecret" -}}
{{- default (printf "%s-history-cursor" (include "mailmesh.fullname" .)) .Values.history.cursorSecret.existingSecret }}
{{- end }}

{{- define "mailmesh.nodeKeySecret" -}}
{{- $edge := index .Values.services "edge-peer" }}
{{- default (printf "%s-node-keys" (include "mailmesh.componentName" (dict "root" . "name" "edge-peer"))) $edge.p2p.nodeKeys.existingSecret }}
{{- end }}

{{- define "mailmesh.dataClaim" -}}
{{- default (printf "%s-data" (include "mailmesh.fullname" .)) .Values.storage.sqlite.existingClaim }}
{{- end }}

{{/* Whether service .name gets egress to the internet (edge peers; send when it asks store nodes over RLPx). */}}
{{- define "mailmesh.internetEgress" -}}
{{- $svc := index .root.Values.services .name }}
{{- if or $svc.egressToInternet (and $svc.messagingApi .root.Values.messaging.storeNodes) }}true{{ end }}
{{- end }}
