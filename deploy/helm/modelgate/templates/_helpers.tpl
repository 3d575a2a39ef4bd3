{{/* The chart's name, or nameOverride. */}}
{{- define "modelgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The objects' name: the release's, holding the chart's name. Kept short
enough for the "-grpc-headless" Service. */}}
{{- define "modelgate.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 49 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 49 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 49 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "modelgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "modelgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "modelgate.labels" -}}
{{ include "modelgate.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The Secret a reference names: its own secretName, else existingSecret,
else the release's full name. */}}
{{- define "modelgate.secretName" -}}
{{- .ref.secretName | default .root.Values.existingSecret | default (include "modelgate.fullname" .root) }}
{{- end }}

{{- define "modelgate.grpcService" -}}
{{- printf "%s-grpc" (include "modelgate.fullname" .) }}
{{- end }}

{{- define "modelgate.headlessService" -}}
{{- printf "%s-grpc-headless" (include "modelgate.fullname" .) }}
{{- end }}

{{/* Environment variables the chart names in the config. */}}
{{- define "modelgate.postgresEnv" -}}MODELGATE_POSTGRES_URL{{- end }}
{{- define "modelgate.redisEnv" -}}MODELGATE_REDIS_URL{{- end }}
{{- define "modelgate.adminTokenEnv" -}}MODELGATE_ADMIN_TOKEN{{- end }}
{{- define "modelgate.sqlitePath" -}}/data/modelgate.db{{- end }}

{{/* The modelgate config: .Values.config plus what the chart decides. */}}
{{- define "modelgate.config" -}}
{{- $cfg := deepCopy .Values.config }}
{{- $_ := set $cfg "server" (dict
  "grpc_listen" (printf "0.0.0.0:%d" (int .Values.ports.grpc))
  "admin_listen" (printf "0.0.0.0:%d" (int .Values.ports.admin))
  "shutdown_grace" (printf "%ds" (int .Values.shutdownGraceSeconds))) }}
{{- $svc := include "modelgate.grpcService" . }}
{{- if .Values.service.headless }}
{{- $svc = include "modelgate.headlessService" . }}
{{- end }}
{{- $envoy := get $cfg "envoy" | default dict }}
{{- $_ = set $envoy "ext_proc_address" (printf "%s.%s.svc.%s:%d" $svc .Release.Namespace .Values.clusterDomain (int .Values.ports.grpc)) }}
{{- $_ = set $cfg "envoy" $envoy }}
{{- $storage := get $cfg "storage" | default dict }}
{{- if .Values.postgresql.enabled }}
{{- $_ = set $storage "postgres_url_env" (include "modelgate.postgresEnv" .) }}
{{- else }}
{{- $_ = set $storage "sqlite_path" (include "modelgate.sqlitePath" .) }}
{{- end }}
{{- $_ = set $cfg "storage" $storage }}
{{- if .Values.redis.enabled }}
{{- $rl := get $cfg "rate_limits" | default dict }}
{{- $_ = set $rl "store" "redis" }}
{{- $_ = set $rl "redis_url_env" (include "modelgate.redisEnv" .) }}
{{- $_ = set $cfg "rate_limits" $rl }}
{{- end }}
{{- $admin := get $cfg "admin" | default dict }}
{{- $_ = set $admin "token_env" (include "modelgate.adminTokenEnv" .) }}
{{- $_ = set $cfg "admin" $admin }}
{{- toYaml $cfg }}
{{- end }}
