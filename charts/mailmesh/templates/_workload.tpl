{{/*
One service's ServiceAccount, ConfigMap, Deployment or StatefulSet: (dict "root" $ "name" "archive").
Pods are hardened (platform-notes "Helm charts"): non-root numeric user, read-only root filesystem, every
capability dropped, RuntimeDefault seccomp, no service account token, no service links (Kubernetes would
inject <SERVICE>_PORT variables that look like settings). Probes are native gRPC probes on the numeric gRPC
port asking for the service's own grpc.health.v1 name (KEP-2727), with a startup probe for the store opening.
*/}}
{{- define "mailmesh.workload" -}}
{{- $root := .root }}
{{- $name := .name }}
{{- $svc := index $root.Values.services $name }}
{{- $full := include "mailmesh.componentName" . }}
{{- $defaults := $root.Values.podDefaults }}
{{- $settings := include "mailmesh.settings" . }}
{{- $sqlite := and (eq $root.Values.storage.backend "sqlite") (ne $svc.store "none") }}
{{- $grace := int $root.Values.shutdownGraceSeconds }}
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ $full }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "mailmesh.componentLabels" . | nindent 4 }}
automountServiceAccountToken: false
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ $full }}-env
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "mailmesh.componentLabels" . | nindent 4 }}
data:
  {{- $settings | nindent 2 }}
---
apiVersion: apps/v1
kind: {{ $svc.workload }}
metadata:
  name: {{ $full }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "mailmesh.componentLabels" . | nindent 4 }}
spec:
  {{- if not (include "mailmesh.autoscaled" .) }}
  replicas: {{ include "mailmesh.replicas" . }}
  {{- end }}
  revisionHistoryLimit: 5
  selector:
    matchLabels:
      {{- include "mailmesh.componentSelector" . | nindent 6 }}
  {{- if eq $svc.workload "StatefulSet" }}
  serviceName: {{ $full }}
  # Replicas are independent nodes: start and replace them all at once.
  podManagementPolicy: Parallel
  {{- else if $sqlite }}
  # One process per SQLite file: the old pod stops before the new one opens the store.
  strategy:
    type: Recreate
  {{- end }}
  template:
    metadata:
      labels:
        {{- include "mailmesh.componentLabels" . | nindent 8 }}
      annotations:
        checksum/config: {{ $settings | sha256sum }}
        checksum/secrets: {{ include "mailmesh.secretsChecksum" . }}
        {{- with $svc.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ $full }}
      automountServiceAccountToken: false
      enableServiceLinks: false
      terminationGracePeriodSeconds: {{ add $grace 20 }}
      securityContext:
        {{- toYaml $defaults.podSecurityContext | nindent 8 }}
      {{- with $root.Values.image.pullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $svc.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $svc.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- if and $sqlite (ne $svc.store "archive") }}
      # The SQLite files live on one ReadWriteOnce volume: run beside the archive, on its node.
      affinity:
        podAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - topologyKey: kubernetes.io/hostname
              labelSelector:
                matchLabels:
                  {{- include "mailmesh.componentSelector" (dict "root" $root "name" "archive") | nindent 18 }}
      {{- else }}
      {{- with $svc.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- end }}
      {{- if $svc.p2p }}
      initContainers:
        # The node key of this replica, from the Secret into a memory volume as a 0600 file owned by the
        # service's user (a Secret volume's files belong to root: readable only through the group, and
        # devp2p warns about a key readable by others).
        - name: node-key
          image: {{ include "mailmesh.image" $root }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          command: ["sh", "-c", "install -m 0600 \"/var/run/secrets/mailmesh/node-keys/${POD_NAME}\" /var/run/mailmesh/node-key/nodekey"]
          env:
            - name: POD_NAME
              valueFrom:
                fieldRef:
                  fieldPath: metadata.name
          securityContext:
            {{- toYaml $defaults.securityContext | nindent 12 }}
          resources:
            requests: {cpu: 10m, memory: 16Mi}
            limits: {cpu: 100m, memory: 64Mi}
          volumeMounts:
            - name: node-keys
              mountPath: /var/run/secrets/mailmesh/node-keys
              readOnly: true
            - name: node-key
              mountPath: /var/run/mailmesh/node-key
      {{- end }}
      containers:
        - name: {{ $name }}
          image: {{ include "mailmesh.image" $root }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          command: ["python", "-m", {{ $svc.module | quote }}]
          envFrom:
            - configMapRef:
                name: {{ $full }}-env
          {{- $secretEnv := include "mailmesh.secretEnv" . }}
          {{- if $secretEnv }}
          env:
            {{- $secretEnv | nindent 12 }}
          {{- end }}
          ports:
            - name: grpc
              containerPort: {{ $svc.grpcPort }}
              protocol: TCP
            - name: metrics
              containerPort: {{ $svc.metricsPort }}
              protocol: TCP
            {{- if $root.Values.security.tls.existingSecret }}
            - name: probe
              containerPort: {{ $root.Values.security.tls.probePort }}
              protocol: TCP
            {{- end }}
            {{- range $svc.extraPorts }}
            - name: {{ .name }}
              containerPort: {{ .port }}
              protocol: {{ .protocol | default "TCP" }}
            {{- end }}
          {{- $probes := $defaults.probes }}
          {{- /* The kubelet's gRPC probes cannot do TLS: with mutual TLS they use the plaintext health-only port. */}}
          {{- $probePort := ternary $root.Values.security.tls.probePort $svc.grpcPort (ne $root.Values.security.tls.existingSecret "") }}
          startupProbe:
            grpc:
              port: {{ $probePort }}
              service: {{ $svc.healthService | quote }}
            {{- toYaml $probes.startup | nindent 12 }}
          readinessProbe:
            grpc:
              port: {{ $probePort }}
              service: {{ $svc.healthService | quote }}
            {{- toYaml $probes.readiness | nindent 12 }}
          # Liveness asks for the whole server (""): a service whose store is down reports NOT_SERVING for its
          # own name and must leave the endpoints, not be restarted in a loop.
          livenessProbe:
            grpc:
              port: {{ $probePort }}
              service: ""
            {{- toYaml $probes.liveness | nindent 12 }}
          resources:
            {{- toYaml $svc.resources | nindent 12 }}
          securityContext:
            {{- toYaml $defaults.securityContext | nindent 12 }}
          volumeMounts:
            - name: tmp
              mountPath: /tmp
            {{- if $sqlite }}
            - name: data
              mountPath: /var/lib/mailmesh
            {{- end }}
            {{- if $svc.p2p }}
            - name: node-key
              mountPath: /var/run/mailmesh/node-key
              readOnly: true
            {{- end }}
            {{- with include "mailmesh.securityVolumes" (dict "root" $root "volumes" false) }}
            {{- . | nindent 12 }}
            {{- end }}
      volumes:
        - name: tmp
          emptyDir:
            sizeLimit: {{ $defaults.tmpSizeLimit }}
        {{- with include "mailmesh.securityVolumes" (dict "root" $root "volumes" true) }}
        {{- . | nindent 8 }}
        {{- end }}
        {{- if $sqlite }}
        - name: data
          persistentVolumeClaim:
            claimName: {{ include "mailmesh.dataClaim" $root }}
        {{- end }}
        {{- if $svc.p2p }}
        - name: node-keys
          secret:
            secretName: {{ include "mailmesh.nodeKeySecret" $root }}
            defaultMode: 0440
        - name: node-key
          emptyDir:
            medium: Memory
            sizeLimit: 1Mi
        {{- end }}
{{- end }}

{{/* A digest of the chart-managed Secrets a service's pods read, so a changed secret rolls them. */}}
{{- define "mailmesh.secretsChecksum" -}}
{{- $root := .root }}
{{- $svc := index $root.Values.services .name }}
{{- $parts := list }}
{{- if and (ne $svc.store "none") (eq $root.Values.storage.backend "cassandra") }}
{{- $parts = append $parts (include "mailmesh.cassandraSecretData" $root) }}
{{- end }}
{{- if eq $svc.envPrefix "HISTORY" }}
{{- $parts = append $parts (include "mailmesh.cursorSecretData" $root) }}
{{- end }}
{{- if $svc.p2p }}
{{- $parts = append $parts (include "mailmesh.nodeKeyData" $root) }}
{{- end }}
{{- join "\n" $parts | sha256sum }}
{{- end }}
