{{/* Names and labels shared by every object of the chart. */}}

{{/* kici.name is the chart name, or nameOverride. */}}
{{- define "kici.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* kici.fullname prefixes every object: fullnameOverride, the release
name when it already says kici, else <release>-kici. 63 characters at most
(DNS labels). */}}
{{- define "kici.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* kici.selectorLabels select the orchestrator pods (immutable in a
Deployment: never add to them). */}}
{{- define "kici.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kici.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: orchestrator
{{- end -}}

{{/* kici.labels go on every object. */}}
{{- define "kici.labels" -}}
{{ include "kici.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{/* kici.image is the orchestrator image reference. */}}
{{- define "kici.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* kici.serviceAccountName is the orchestrators' service account. */}}
{{- define "kici.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kici.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* kici.scalerNamespace is where job pods run: the release namespace
unless set (the Role is created there). */}}
{{- define "kici.scalerNamespace" -}}
{{- default .Release.Namespace .Values.kubernetesScaler.namespace -}}
{{- end -}}

{{/* kici.secretName names the chart's own Secret (the values it generated
or was given in plain text). */}}
{{- define "kici.secretName" -}}
{{- include "kici.fullname" . -}}
{{- end -}}

{{/* kici.terminationGrace is terminationGracePeriodSeconds: the preStop
wait, then KICI_SHUTDOWN_GRACE_MS rounded up to seconds, plus 30 s for the
hand-over and the exit after the grace (docs/operations.md, Drain and
stop). */}}
{{- define "kici.terminationGrace" -}}
{{- $grace := div (add (int64 .Values.shutdownGraceMs) 999) 1000 -}}
{{- add $grace 30 (int64 .Values.preStopSleepSeconds) -}}
{{- end -}}

{{/* kici.validate stops the render on values that would deploy a broken
cluster, saying which value to set. */}}
{{- define "kici.validate" -}}
{{- if and (not .Values.database.existingSecret) (not .Values.database.url) -}}
{{- fail "database: set database.existingSecret (a Secret with the PostgreSQL URL) or database.url — replicas share one external PostgreSQL" -}}
{{- end -}}
{{- if and .Values.database.url (not (hasPrefix "postgres" .Values.database.url)) -}}
{{- fail "database.url must be a postgres:// or postgresql:// URL" -}}
{{- end -}}
{{- if not .Values.storage.bucket -}}
{{- fail "storage.bucket: set the S3 bucket — replicas share caches, artifacts and archived logs through it" -}}
{{- end -}}
{{- if lt (int64 .Values.replicaCount) 1 -}}
{{- fail "replicaCount must be at least 1" -}}
{{- end -}}
{{- if lt (int64 .Values.shutdownGraceMs) 0 -}}
{{- fail "shutdownGraceMs must be 0 or more" -}}
{{- end -}}
{{- if lt (int64 .Values.preStopSleepSeconds) 0 -}}
{{- fail "preStopSleepSeconds must be 0 or more" -}}
{{- end -}}
{{- if and .Values.secretKey.value (not (or (regexMatch "^[0-9a-fA-F]{64}$" .Values.secretKey.value) (eq (len (b64dec .Values.secretKey.value)) 32))) -}}
{{- fail "secretKey.value must be 64 hex digits or the base64 of 32 bytes" -}}
{{- end -}}
{{- if .Values.kubernetesScaler.enabled -}}
{{- if not (regexMatch "^[a-z0-9-]+$" .Values.kubernetesScaler.name) -}}
{{- fail "kubernetesScaler.name must match [a-z0-9-]+" -}}
{{- end -}}
{{- if lt (int64 .Values.kubernetesScaler.maxAgents) 1 -}}
{{- fail "kubernetesScaler.maxAgents must be at least 1" -}}
{{- end -}}
{{- if not .Values.kubernetesScaler.labelSets -}}
{{- fail "kubernetesScaler.labelSets: at least one label set" -}}
{{- end -}}
{{- end -}}
{{- end -}}
