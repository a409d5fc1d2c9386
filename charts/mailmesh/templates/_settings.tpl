{{/*
The settings of service .name as a YAML map of environment variables (its ConfigMap's data). Names follow
each service's config.py (docs/service-template.md): <PREFIX>_* runtime settings, <PREFIX>_<CALLEE>_ADDR for
every call, the store's ARCHIVE_* or MSGSTORE_*, the Messaging API's MSGAPI_*. Secrets (Cassandra contact
points, cursor secrets, node keys) never appear here: "mailmesh.secretEnv" and the pod's volumes carry them.
*/}}
{{- define "mailmesh.settings" -}}
{{- $root := .root }}
{{- $svc := index $root.Values.services .name }}
{{- $p := $svc.envPrefix }}
{{- $cass := $root.Values.storage.cassandra }}
{{ $p }}_SERVICE_NAME: {{ .name | quote }}
{{ $p }}_GRPC_HOST: {{ $root.Values.bindAddress | quote }}
{{ $p }}_GRPC_PORT: {{ $svc.grpcPort | quote }}
{{ $p }}_METRICS_PORT: {{ $svc.metricsPort | quote }}
{{ $p }}_SHUTDOWN_GRACE_SECONDS: {{ $root.Values.shutdownGraceSeconds | quote }}
MAILMESH_LOG_LEVEL: {{ $root.Values.logging.level | quote }}
MAILMESH_LOG_FORMAT: {{ $root.Values.logging.format | quote }}
{{- with $root.Values.tracing.otlpEndpoint }}
OTEL_EXPORTER_OTLP_ENDPOINT: {{ . | quote }}
{{- end }}
{{- range $svc.extraPorts }}
{{ .env }}: {{ .port | quote }}
{{- with .hostEnv }}
{{ . }}: {{ $root.Values.bindAddress | quote }}
{{- end }}
{{- end }}
{{- range $callee := concat $svc.calls $svc.observes }}
{{- $other := index $root.Values.services $callee }}
{{ $p }}_{{ $other.envPrefix }}_ADDR: {{ include "mailmesh.address" (dict "root" $root "name" $callee) | quote }}
{{- end }}
{{- with $svc.p2p }}
EDGE_NODE_KEY_FILE: "/var/run/mailmesh/node-key/nodekey"
{{- with .advertisedHost }}
EDGE_ADVERTISED_HOST: {{ . | quote }}
{{- end }}
{{- end }}
{{- if eq $p "HISTORY" }}
HISTORY_CURSOR_SECRET_AUTOCREATE: "false"
{{- end }}
{{- if eq $svc.store "archive" }}
{{- include "mailmesh.archiveStoreSettings" $root }}
{{- end }}
{{- if eq $svc.store "messaging" }}
MSGSTORE_BACKEND: {{ $root.Values.storage.backend | quote }}
{{- if eq $root.Values.storage.backend "sqlite" }}
MSGSTORE_SQLITE_PATH: "/var/lib/mailmesh/messaging.sqlite3"
{{- else }}
MSGSTORE_CASSANDRA_PORT: {{ $cass.port | quote }}
MSGSTORE_CASSANDRA_KEYSPACE: {{ $cass.messagingKeyspace | quote }}
MSGSTORE_CASSANDRA_CONSISTENCY: {{ $cass.consistency | quote }}
MSGSTORE_CASSANDRA_LOCAL_DC: {{ $cass.localDc | quote }}
MSGSTORE_CASSANDRA_REPLICATION_FACTOR: {{ $cass.replicationFactor | quote }}
{{- end }}
{{- range $k, $v := $root.Values.storage.messaging }}
{{ $k }}: {{ $v | toString | quote }}
{{- end }}
{{- end }}
{{- if $svc.messagingApi }}
{{- $m := $root.Values.messaging }}
MSGAPI_MODE: "relay"
MSGAPI_CLUSTER_ID: {{ $m.clusterId | quote }}
MSGAPI_SHARDS: {{ join "," $m.shards | quote }}
MSGAPI_STORE_NODES: {{ join "," $m.storeNodes | quote }}
MSGAPI_BOOTSTRAP_NODES: {{ join "," $m.bootstrapNodes | quote }}
MSGAPI_STORE_CONFIRMATION: {{ $m.storeConfirmation | quote }}
MSGAPI_FILTER_CONFIRMATION: {{ $m.filterConfirmation | quote }}
MSGAPI_CONFIRM_CONTENT_TOPICS: {{ join "," $m.confirmContentTopics | quote }}
MSGAPI_STORE_CHECK_INTERVAL_SECONDS: {{ $m.storeCheckIntervalSeconds | quote }}
{{- end }}
{{- range $k, $v := $svc.env }}
{{ $k }}: {{ $v | toString | quote }}
{{- end }}
{{- end }}

{{/* The archive store's settings: the archive service and the Spark job read the same ones. */}}
{{- define "mailmesh.archiveStoreSettings" -}}
{{- $cass := .Values.storage.cassandra }}
ARCHIVE_BACKEND: {{ .Values.storage.backend | quote }}
{{- if eq .Values.storage.backend "sqlite" }}
ARCHIVE_SQLITE_PATH: "/var/lib/mailmesh/archive.sqlite3"
{{- else }}
ARCHIVE_CASSANDRA_PORT: {{ $cass.port | quote }}
ARCHIVE_CASSANDRA_KEYSPACE: {{ $cass.archiveKeyspace | quote }}
ARCHIVE_CASSANDRA_CONSISTENCY: {{ $cass.consistency | quote }}
ARCHIVE_CASSANDRA_LOCAL_DC: {{ $cass.localDc | quote }}
ARCHIVE_CASSANDRA_REPLICATION_FACTOR: {{ $cass.replicationFactor | quote }}
ARCHIVE_CASSANDRA_REPLICATION_DCS: {{ $cass.replicationDcs | quote }}
{{- end }}
{{- range $k, $v := .Values.storage.archive }}
{{ $k }}: {{ $v | toString | quote }}
{{- end }}
{{- end }}

{{/* Env entries read from Secrets (and the pod's own name) for service .name. */}}
{{- define "mailmesh.secretEnv" -}}
{{- $root := .root }}
{{- $svc := index $root.Values.services .name }}
{{- with $svc.instanceEnv }}
- name: {{ . }}
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
{{- end }}
{{- if and (ne $svc.store "none") (eq $root.Values.storage.backend "cassandra") }}
- name: {{ ternary "ARCHIVE" "MSGSTORE" (eq $svc.store "archive") }}_CASSANDRA_HOSTS
  valueFrom:
    secretKeyRef:
      name: {{ include "mailmesh.cassandraSecret" $root }}
      key: {{ $root.Values.storage.cassandra.contactPointsKey }}
{{- end }}
{{- if eq $svc.envPrefix "HISTORY" }}
- name: HISTORY_CURSOR_SECRETS
  valueFrom:
    secretKeyRef:
      name: {{ include "mailmesh.cursorSecret" $root }}
      key: {{ $root.Values.history.cursorSecret.key }}
{{- end }}
{{- end }}
