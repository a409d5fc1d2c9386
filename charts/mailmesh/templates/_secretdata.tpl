{{/* Secret data (base64), shared by secrets.yaml and the checksum annotations. Root context. */}}
{{- define "mailmesh.cassandraSecretData" -}}
{{- $c := .Values.storage.cassandra }}
{{- if $c.existingSecret }}
{{- printf "existing: %s" $c.existingSecret }}
{{- else }}
{{- $points := required "storage.cassandra.contactPoints: list the Cassandra contact points (or give storage.cassandra.existingSecret, or set storage.backend=sqlite)" $c.contactPoints }}
{{ $c.contactPointsKey }}: {{ join "," $points | b64enc }}
{{- end }}
{{- end }}

{{- define "mailmesh.cursorSecretData" -}}
{{- $c := .Values.history.cursorSecret }}
{{- if $c.existingSecret }}
{{- printf "existing: %s" $c.existingSecret }}
{{- else }}
{{- $memo := include "mailmesh.memo" . | fromYaml }}
{{ $c.key }}: {{ $memo.cursor }}
{{- end }}
{{- end }}

{{- define "mailmesh.nodeKeyData" -}}
{{- $edge := index .Values.services "edge-peer" }}
{{- if $edge.p2p.nodeKeys.existingSecret }}
{{- printf "existing: %s" $edge.p2p.nodeKeys.existingSecret }}
{{- else }}
{{- $memo := include "mailmesh.memo" . | fromYaml }}
{{- range $k, $v := $memo.nodeKeys }}
{{ $k }}: {{ $v }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Generated secrets, made once per render: the values already in the cluster (lookup; empty under `helm
template`), else fresh ones — a 32-byte hex cursor secret, a 32-byte hex secp256k1 key per edge-peer replica
(a random 256-bit value is a valid key with overwhelming probability; devp2p refuses an invalid one at start).
*/}}
{{- define "mailmesh.memo" -}}
{{- if not (hasKey .Values "generatedSecrets") }}
{{- $cursorName := include "mailmesh.cursorSecret" . }}
{{- $cursor := "" }}
{{- $found := lookup "v1" "Secret" .Release.Namespace $cursorName }}
{{- if and $found $found.data (hasKey $found.data .Values.history.cursorSecret.key) }}
{{- $cursor = index $found.data .Values.history.cursorSecret.key }}
{{- else }}
{{- $cursor = randAlphaNum 64 | sha256sum | b64enc }}
{{- end }}
{{- $keys := dict }}
{{- $edgeName := include "mailmesh.componentName" (dict "root" . "name" "edge-peer") }}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "mailmesh.nodeKeySecret" .) }}
{{- if and $existing $existing.data }}
{{- /* Every key already there stays, so scaling down and up again keeps each replica's identity. */}}
{{- $keys = deepCopy $existing.data }}
{{- end }}
{{- range $i := until (int (include "mailmesh.replicas" (dict "root" . "name" "edge-peer"))) }}
{{- $key := printf "%s-%d" $edgeName $i }}
{{- if not (hasKey $keys $key) }}
{{- $_ := set $keys $key (randAlphaNum 64 | sha256sum | b64enc) }}
{{- end }}
{{- end }}
{{- $_ := set .Values "generatedSecrets" (dict "cursor" $cursor "nodeKeys" $keys) }}
{{- end }}
{{- toYaml .Values.generatedSecrets }}
{{- end }}
