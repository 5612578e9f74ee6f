{{/* Names, labels and addresses shared by the templates. */}}

{{- define "rafka.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "rafka.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* A map of strings (labels, annotations): values quoted, so `true` or 8080 stay strings. */}}
{{- define "rafka.stringMap" -}}
{{- $out := list -}}
{{- range $k, $v := . -}}
{{- $out = append $out (printf "%s: %s" $k ($v | toString | quote)) -}}
{{- end -}}
{{- join "\n" $out -}}
{{- end -}}

{{- define "rafka.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "rafka.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ include "rafka.stringMap" . }}
{{- end }}
{{- end -}}

{{/* Selector labels of one component: (dict "ctx" $ "component" "meta") */}}
{{- define "rafka.selectorLabels" -}}
app.kubernetes.io/name: {{ include "rafka.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "rafka.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "rafka.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "rafka.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "rafka.meta.headless" -}}
{{- printf "%s-meta-headless" (include "rafka.fullname" .) -}}
{{- end -}}

{{- define "rafka.broker.headless" -}}
{{- printf "%s-broker-headless" (include "rafka.fullname" .) -}}
{{- end -}}

{{/*
DNS name of meta pod i, with the namespace left to the pod's $(POD_NAMESPACE) so the same
manifests work in any namespace (Kubernetes expands $(VAR) in env values).
*/}}
{{- define "rafka.meta.host" -}}
{{- printf "%s-meta-%d.%s.$(POD_NAMESPACE).svc.%s" (include "rafka.fullname" .ctx) .i (include "rafka.meta.headless" .ctx) .ctx.Values.clusterDomain -}}
{{- end -}}

{{/* id@host:port of every meta node, for the given port: (dict "ctx" $ "port" 9292) */}}
{{- define "rafka.meta.addresses" -}}
{{- $out := list -}}
{{- range $i := until (int .ctx.Values.meta.replicas) -}}
{{- $out = append $out (printf "%d@%s:%d" (add $i 1) (include "rafka.meta.host" (dict "ctx" $.ctx "i" $i)) (int $.port)) -}}
{{- end -}}
{{- join "," $out -}}
{{- end -}}

{{/* host:port of every meta node's gRPC API, for brokers' meta.bootstrap.servers */}}
{{- define "rafka.meta.bootstrap" -}}
{{- $out := list -}}
{{- range $i := until (int .Values.meta.replicas) -}}
{{- $out = append $out (printf "%s:%d" (include "rafka.meta.host" (dict "ctx" $ "i" $i)) (int $.Values.meta.grpcPort)) -}}
{{- end -}}
{{- join "," $out -}}
{{- end -}}

{{/* A pod's own DNS name through its headless Service (namespace from the downward API). */}}
{{- define "rafka.broker.podHost" -}}
{{- printf "$(POD_NAME).%s.$(POD_NAMESPACE).svc.%s" (include "rafka.broker.headless" .) .Values.clusterDomain -}}
{{- end -}}

{{/* The environment every Rafka container gets first: its pod name and namespace. */}}
{{- define "rafka.podEnv" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- end -}}

{{/*
The internal credentials (common/internal_security.py) from the Secrets named in
internalSecurity; no value of them is ever in the chart.
*/}}
{{- define "rafka.internalEnv" -}}
{{- $s := .Values.internalSecurity -}}
- name: RAFKA_INTERNAL_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ default (printf "%s-internal" (include "rafka.fullname" .)) $s.secretName }}
      key: {{ $s.secretKey }}
{{- $tls := $s.tls.secretName -}}
{{- if $tls }}
{{- range $setting, $key := dict "KEYSTORE_CERTIFICATE_CHAIN" "tls.crt" "KEYSTORE_KEY" "tls.key" "TRUSTSTORE_CERTIFICATES" "ca.crt" }}
- name: RAFKA_INTERNAL_SSL_{{ $setting }}
  valueFrom:
    secretKeyRef:
      name: {{ $tls }}
      key: {{ $key }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Soft anti-affinity: prefer one pod of the component per node. */}}
{{- define "rafka.affinity" -}}
{{- if .affinity -}}
{{ toYaml .affinity }}
{{- else -}}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "rafka.selectorLabels" (dict "ctx" .ctx "component" .component) | nindent 12 }}
{{- end -}}
{{- end -}}

{{/* Validation of values that would render a broken cluster. */}}
{{- define "rafka.validate" -}}
{{- $m := int .Values.meta.replicas -}}
{{- if not (has $m (list 1 3 5)) -}}
{{- fail (printf "meta.replicas must be 1, 3 or 5 (a Raft quorum), got %d" $m) -}}
{{- end -}}
{{- if lt (int .Values.broker.replicas) 1 -}}
{{- fail "broker.replicas must be at least 1" -}}
{{- end -}}
{{- if and .Values.external.enabled (not .Values.external.advertisedHost) -}}
{{- fail "external.enabled needs external.advertisedHost: the host clients reach the brokers at" -}}
{{- end -}}
{{- if not .Values.internalSecurity.secretKey -}}
{{- fail "internalSecurity.secretKey must name the key of the cluster secret in its Secret" -}}
{{- end -}}
{{- if not (has .Values.external.type (list "NodePort" "LoadBalancer")) -}}
{{- fail (printf "external.type must be NodePort or LoadBalancer, got %s" .Values.external.type) -}}
{{- end -}}
{{- end -}}
