{{/* PodDisruptionBudget (policy/v1) and HorizontalPodAutoscaler (autoscaling/v2) of service .name. */}}
{{- define "mailmesh.scaling" -}}
{{- $root := .root }}
{{- $svc := index $root.Values.services .name }}
{{- if $svc.pdb.enabled }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "mailmesh.componentName" . }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "mailmesh.componentLabels" . | nindent 4 }}
spec:
  {{- if hasKey $svc.pdb "minAvailable" }}
  minAvailable: {{ $svc.pdb.minAvailable }}
  {{- else }}
  maxUnavailable: {{ $svc.pdb.maxUnavailable }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "mailmesh.componentSelector" . | nindent 6 }}
{{- end }}
{{- if include "mailmesh.autoscaled" . }}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {{ include "mailmesh.componentName" . }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "mailmesh.componentLabels" . | nindent 4 }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: {{ $svc.workload }}
    name: {{ include "mailmesh.componentName" . }}
  minReplicas: {{ $svc.autoscaling.minReplicas }}
  maxReplicas: {{ $svc.autoscaling.maxReplicas }}
  metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: {{ $svc.autoscaling.targetCPUUtilizationPercentage }}
{{- end }}
{{- end }}

{{/* An Ingress to one of service .name's ports (ingress.port names it): for HTTP services such as a gateway. */}}
{{- define "mailmesh.ingress" -}}
{{- $root := .root }}
{{- $svc := index $root.Values.services .name }}
{{- $ing := $svc.ingress }}
{{- if $ing.enabled }}
{{- $port := required (printf "services.%s.ingress.port: name the port the Ingress routes to" .name) $ing.port }}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: {{ include "mailmesh.componentName" . }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "mailmesh.componentLabels" . | nindent 4 }}
  {{- with $ing.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  {{- with $ing.className }}
  ingressClassName: {{ . }}
  {{- end }}
  {{- with $ing.tls }}
  tls:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  rules:
    {{- range $ing.hosts }}
    - host: {{ . | quote }}
      http:
        paths:
          - path: /
            pathType: Prefix
            backend:
              service:
                name: {{ include "mailmesh.componentName" $ }}
                port:
                  name: {{ $port }}
    {{- end }}
{{- end }}
{{- end }}
