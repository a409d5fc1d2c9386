{{/*
A service's Service (named ports; headless for a StatefulSet, whose replicas are addressed one by one); for a
Deployment also `<component>-headless`, the gRPC port only, which the other services call ("mailmesh.address":
one DNS record per ready pod, balanced per call), while the ClusterIP Service stays for metrics scraping, the
gateway's Ingress and anything outside the mesh; the per-replica devp2p Services of the edge peer.
(dict "root" $ "name" "x")
*/}}
{{- define "mailmesh.service" -}}
{{- $root := .root }}
{{- $svc := index $root.Values.services .name }}
{{- $full := include "mailmesh.componentName" . }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ $full }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "mailmesh.componentLabels" . | nindent 4 }}
    mailmesh.io/metrics: "true"
spec:
  {{- if eq $svc.workload "StatefulSet" }}
  clusterIP: None
  # The health service must reach a replica that is not ready yet (to report it): DNS names exist from start.
  publishNotReadyAddresses: true
  {{- else }}
  type: ClusterIP
  {{- end }}
  selector:
    {{- include "mailmesh.componentSelector" . | nindent 4 }}
  ports:
    - name: grpc
      port: {{ $svc.grpcPort }}
      targetPort: grpc
      protocol: TCP
      appProtocol: grpc
    - name: metrics
      port: {{ $svc.metricsPort }}
      targetPort: metrics
      protocol: TCP
      appProtocol: http
    {{- range $svc.extraPorts }}
    {{- /* An edge peer's public devp2p port has a Service per replica (below); any other port, public or
    not (the gateway's REST port, reached through an Ingress), is on the component's one Service. */}}
    {{- if or (not .public) (not $svc.p2p) }}
    - name: {{ .name }}
      port: {{ .port }}
      targetPort: {{ .name }}
      protocol: {{ .protocol | default "TCP" }}
    {{- end }}
    {{- end }}
{{- if ne $svc.workload "StatefulSet" }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ $full }}-headless
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "mailmesh.componentLabels" . | nindent 4 }}
spec:
  # No cluster IP: DNS answers with each ready pod's address, which gRPC's round_robin and the health and
  # subscription services' instance discovery use (docs/reliability.md "How clients balance").
  clusterIP: None
  selector:
    {{- include "mailmesh.componentSelector" . | nindent 4 }}
  ports:
    - name: grpc
      port: {{ $svc.grpcPort }}
      targetPort: grpc
      protocol: TCP
      appProtocol: grpc
{{- end }}
{{- if $svc.p2p }}
{{- $p2p := $svc.p2p }}
{{- range $i := until (int (include "mailmesh.replicas" $)) }}
{{- $pod := printf "%s-%d" $full $i }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ $pod }}-p2p
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "mailmesh.componentLabels" $ | nindent 4 }}
  {{- with $p2p.serviceAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  type: {{ $p2p.serviceType }}
  {{- if ne $p2p.serviceType "ClusterIP" }}
  # Local: the peer sees the dialler's real address (per-IP throttling and rate limits rely on it).
  externalTrafficPolicy: {{ $p2p.externalTrafficPolicy }}
  {{- end }}
  {{- if and (eq $p2p.serviceType "LoadBalancer") $p2p.loadBalancerSourceRanges }}
  loadBalancerSourceRanges:
    {{- toYaml $p2p.loadBalancerSourceRanges | nindent 4 }}
  {{- end }}
  selector:
    {{- include "mailmesh.componentSelector" $ | nindent 4 }}
    statefulset.kubernetes.io/pod-name: {{ $pod }}
  ports:
    {{- range $svc.extraPorts }}
    {{- if .public }}
    - name: {{ .name }}
      port: {{ .port }}
      targetPort: {{ .name }}
      protocol: {{ .protocol | default "TCP" }}
      {{- if and (ne $p2p.serviceType "ClusterIP") (gt (len $p2p.nodePorts) $i) }}
      nodePort: {{ index $p2p.nodePorts $i }}
      {{- end }}
    {{- end }}
    {{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The allow-list of service .name: ingress on its gRPC port from exactly the services whose `calls` or
`observes` name it (and the helm test pod), on its metrics port from metricsPeers, on public ports from
anywhere; egress to exactly its callees' gRPC ports, DNS, Cassandra (when it opens a store there), the OTLP
collector (when set) and the internet (edge peers). platform-notes "Helm charts".
*/}}
{{- define "mailmesh.networkPolicy" -}}
{{- $root := .root }}
{{- $name := .name }}
{{- $svc := index $root.Values.services $name }}
{{- $np := $root.Values.networkPolicy }}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: {{ include "mailmesh.componentName" . }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "mailmesh.componentLabels" . | nindent 4 }}
spec:
  podSelector:
    matchLabels:
      {{- include "mailmesh.componentSelector" . | nindent 6 }}
  policyTypes: [Ingress, Egress]
  ingress:
    - ports:
        - port: {{ $svc.grpcPort }}
          protocol: TCP
      from:
        {{- range $caller, $other := $root.Values.services }}
        {{- if and $other.enabled (or (has $name (concat $other.calls $other.observes)) (and (eq $caller $name) $svc.peerCalls)) }}
        - podSelector:
            matchLabels:
              {{- include "mailmesh.componentSelector" (dict "root" $root "name" $caller) | nindent 14 }}
        {{- end }}
        {{- end }}
        {{- if $root.Values.tests.enabled }}
        - podSelector:
            matchLabels:
              {{- include "mailmesh.componentSelector" (dict "root" $root "name" "test") | nindent 14 }}
        {{- end }}
    - ports:
        - port: {{ $svc.metricsPort }}
          protocol: TCP
      {{- if $np.metricsPeers }}
      from:
        {{- toYaml $np.metricsPeers | nindent 8 }}
      {{- else }}
      from:
        - namespaceSelector: {}
      {{- end }}
    {{- range $svc.extraPorts }}
    - ports:
        - port: {{ .port }}
          protocol: {{ .protocol | default "TCP" }}
      {{- if not .public }}
      from:
        - podSelector:
            matchLabels:
              {{- include "mailmesh.selectorLabels" $root | nindent 14 }}
      {{- end }}
    {{- end }}
  egress:
    - ports:
        - port: 53
          protocol: UDP
        - port: 53
          protocol: TCP
      to:
        {{- toYaml $np.dnsPeers | nindent 8 }}
    {{- $callees := concat $svc.calls $svc.observes }}
    {{- if $svc.peerCalls }}{{ $callees = append $callees $name }}{{ end }}
    {{- range $callee := $callees }}
    {{- $other := index $root.Values.services $callee }}
    {{- if $other.enabled }}
    - ports:
        - port: {{ $other.grpcPort }}
          protocol: TCP
      to:
        - podSelector:
            matchLabels:
              {{- include "mailmesh.componentSelector" (dict "root" $root "name" $callee) | nindent 14 }}
    {{- end }}
    {{- end }}
    {{- if and (ne $svc.store "none") (eq $root.Values.storage.backend "cassandra") }}
    - ports:
        - port: {{ $root.Values.storage.cassandra.port }}
          protocol: TCP
      {{- with $root.Values.storage.cassandra.networkPolicyPeers }}
      to:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    {{- end }}
    {{- if $root.Values.tracing.otlpEndpoint }}
    - ports:
        - port: {{ $root.Values.tracing.port }}
          protocol: TCP
      {{- with $root.Values.tracing.networkPolicyPeers }}
      to:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    {{- end }}
    {{- if include "mailmesh.internetEgress" . }}
    - to:
        - ipBlock:
            cidr: 0.0.0.0/0
            {{- with $np.internetExcept }}
            except:
              {{- toYaml . | nindent 14 }}
            {{- end }}
    {{- end }}
{{- end }}
