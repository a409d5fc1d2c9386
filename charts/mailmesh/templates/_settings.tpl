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
{{- include "mailmesh.securitySettings" (dict "root" $root "prefix" $p) }}
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
MSGSTORE_CASSANDRA_REPLICATION_DCS: {{ $cass.replicationDcs | quote }}
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
{{- include "mailmesh.cassandraLogin" (dict "root" $root "prefix" (ternary "ARCHIVE" "MSGSTORE" (eq $svc.store "archive"))) }}
{{- end }}
{{- if eq $svc.envPrefix "HISTORY" }}
- name: HISTORY_CURSOR_SECRETS
  valueFrom:
    secretKeyRef:
      name: {{ include "mailmesh.cursorSecret" $root }}
      key: {{ $root.Values.history.cursorSecret.key }}
{{- end }}
{{- end }}

{{/*
Mutual TLS and token auth (docs/security.md): the files of the mounted Secrets ("mailmesh.securityVolumes"),
the same for every service. With TLS the kubelet's gRPC probes use the plaintext, health-only probe port.
*/}}
{{- define "mailmesh.securitySettings" -}}
{{- $sec := .root.Values.security }}
{{- if $sec.tls.existingSecret }}
MAILMESH_TLS_CERT: "/var/run/secrets/mailmesh/tls/tls.crt"
MAILMESH_TLS_KEY: "/var/run/secrets/mailmesh/tls/tls.key"
MAILMESH_TLS_CA: "/var/run/secrets/mailmesh/tls/ca.crt"
{{ .prefix }}_GRPC_PROBE_PORT: {{ $sec.tls.probePort | quote }}
{{- with $sec.tls.serverName }}
MAILMESH_TLS_SERVER_NAME: {{ . | quote }}
{{- end }}
{{- end }}
{{- if eq $sec.auth.mode "token" }}
{{- $_ := required "security.auth.mode=token needs security.auth.existingSecret (keys clientTokens, serviceTokens, adminTokens)" $sec.auth.existingSecret }}
MAILMESH_AUTH: "token"
{{- range $role := list "CLIENT" "SERVICE" "ADMIN" }}
MAILMESH_AUTH_{{ $role }}_TOKENS_FILE: "/var/run/secrets/mailmesh/auth/{{ lower $role }}Tokens"
{{- end }}
{{- end }}
{{- end }}

{{/* The volumes (.volumes true) or the container's mounts of the TLS and token Secrets. */}}
{{- define "mailmesh.securityVolumes" -}}
{{- $sec := .root.Values.security }}
{{- range $name, $secret := dict "tls" $sec.tls.existingSecret "auth" (ternary $sec.auth.existingSecret "" (eq $sec.auth.mode "token")) }}
{{- if $secret }}
{{- if $.volumes }}
- name: {{ $name }}
  secret:
    secretName: {{ $secret }}
    defaultMode: 0440
{{- else }}
- name: {{ $name }}
  mountPath: /var/run/secrets/mailmesh/{{ $name }}
  readOnly: true
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* The Cassandra login from storage.cassandra.credentialsSecret, as env entries for variables <prefix>_CASSANDRA_*. */}}
{{- define "mailmesh.cassandraLogin" -}}
{{- $c := .root.Values.storage.cassandra }}
{{- if $c.credentialsSecret }}
{{- range $var, $key := dict "USERNAME" $c.usernameKey "PASSWORD" $c.passwordKey }}
- name: {{ $.prefix }}_CASSANDRA_{{ $var }}
  valueFrom:
    secretKeyRef:
      name: {{ $c.credentialsSecret }}
      key: {{ $key }}
{{- end }}
{{- end }}
{{- end }}
