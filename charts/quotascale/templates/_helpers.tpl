{{/*
The chart name, or nameOverride.
*/}}
{{- define "quotascale.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The prefix of every object name: fullnameOverride, or the release name when it
already contains the chart name, or RELEASE-CHART. Kept at 40 characters so
that the longest suffix ("-cluster-autoscaler-leader-election") still fits in
a 63-character name.
*/}}
{{- define "quotascale.fullname" -}}
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

{{- define "quotascale.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Selector labels of one component; call with (dict "root" $ "component" "NAME").
*/}}
{{- define "quotascale.selectorLabels" -}}
app.kubernetes.io/name: {{ include "quotascale.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/*
Labels of every object; call with (dict "root" $ "component" "NAME"), where
component may be empty for objects shared by both components.
*/}}
{{- define "quotascale.labels" -}}
helm.sh/chart: {{ include "quotascale.chart" .root }}
app.kubernetes.io/name: {{ include "quotascale.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- with .component }}
app.kubernetes.io/component: {{ . }}
{{- end }}
app.kubernetes.io/part-of: quotascale
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Object names of the two components. */}}
{{- define "quotascale.autoscaler.fullname" -}}
{{- printf "%s-cluster-autoscaler" (include "quotascale.fullname" .) -}}
{{- end -}}

{{- define "quotascale.scheduler.fullname" -}}
{{- printf "%s-scheduler" (include "quotascale.fullname" .) -}}
{{- end -}}

{{/*
The autoscaler's --cloud-provider. It has no default: kwok, the simulator,
would otherwise be what a one-line install deploys into a real cluster. The
schema refuses unknown names; this refuses the empty one. get, not a field
access, so that a provider unset with --set autoscaler.cloudProvider=null gets
this message too rather than strict mode's missing-key error.
*/}}
{{- define "quotascale.autoscaler.cloudProvider" -}}
{{- $provider := get .Values.autoscaler "cloudProvider" | default "" -}}
{{- if not (has $provider (list "clusterapi" "kwok")) -}}
{{- fail "autoscaler.cloudProvider is required: set it to clusterapi (Cluster API node groups) or kwok (the simulated cloud of test and demo clusters, as in values-demo.yaml), or set autoscaler.enabled: false" -}}
{{- end -}}
{{- $provider -}}
{{- end -}}

{{/* The ServiceAccount whose token Prometheus scrapes the scheduler with,
when monitoring.serviceMonitor.scheduler.credentials names no Secret. */}}
{{- define "quotascale.scheduler.metricsReader" -}}
{{- printf "%s-metrics-reader" (include "quotascale.scheduler.fullname" .) -}}
{{- end -}}

{{/* The Secret key selector of that token: the values' Secret, or the
chart's ServiceAccount token Secret. */}}
{{- define "quotascale.scheduler.metricsCredentials" -}}
{{- $c := .Values.monitoring.serviceMonitor.scheduler.credentials -}}
{{- if $c.name -}}
name: {{ $c.name }}
key: {{ $c.key }}
{{- else -}}
name: {{ include "quotascale.scheduler.metricsReader" . }}-token
key: token
{{- end -}}
{{- end -}}

{{- define "quotascale.autoscaler.serviceAccountName" -}}
{{- if .Values.autoscaler.serviceAccount.create -}}
{{- default (include "quotascale.autoscaler.fullname" .) .Values.autoscaler.serviceAccount.name -}}
{{- else -}}
{{- required "autoscaler.serviceAccount.name is required when autoscaler.serviceAccount.create is false" .Values.autoscaler.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "quotascale.scheduler.serviceAccountName" -}}
{{- if .Values.scheduler.serviceAccount.create -}}
{{- default (include "quotascale.scheduler.fullname" .) .Values.scheduler.serviceAccount.name -}}
{{- else -}}
{{- required "scheduler.serviceAccount.name is required when scheduler.serviceAccount.create is false" .Values.scheduler.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The kwok node-group ConfigMap's name. */}}
{{- define "quotascale.autoscaler.kwokConfigMap" -}}
{{- printf "%s-kwok-config" (include "quotascale.autoscaler.fullname" .) -}}
{{- end -}}

{{/* The profile name the scheduler serves. */}}
{{- define "quotascale.scheduler.schedulerName" -}}
{{- if .Values.scheduler.replaceDefaultProfile -}}
default-scheduler
{{- else -}}
{{- .Values.scheduler.schedulerName -}}
{{- end -}}
{{- end -}}

{{/* The namespace of the scheduler's leader lease. */}}
{{- define "quotascale.scheduler.leaderNamespace" -}}
{{- default .Release.Namespace .Values.scheduler.leaderElection.resourceNamespace -}}
{{- end -}}

{{/*
An image reference; call with (dict "root" $ "image" .Values.X.image).
A digest, when set, pins the image and the tag is only informative.
*/}}
{{- define "quotascale.image" -}}
{{- $tag := default .root.Chart.AppVersion .image.tag -}}
{{- if .image.digest -}}
{{- printf "%s:%s@%s" .image.repository $tag .image.digest -}}
{{- else -}}
{{- printf "%s:%s" .image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/*
Pod and container security contexts. They are not configurable: both programs
run as the distroless nonroot user (65532) on a read-only root file system
with no capabilities, which passes the "restricted" Pod Security Standard.
*/}}
{{- define "quotascale.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "quotascale.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
privileged: false
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/*
One flag value as the command line wants it. Helm reads every number in a
values file as a float64, which printf would show as 1e+06; whole numbers are
printed as integers.
*/}}
{{- define "quotascale.flagValue" -}}
{{- if and (kindIs "float64" .) (eq . (float64 (int64 .))) -}}
{{- int64 . -}}
{{- else -}}
{{- . -}}
{{- end -}}
{{- end -}}

{{/*
Extra command-line flags, sorted by name; call with (dict "args" MAP).
A value that is a list repeats the flag.
*/}}
{{- define "quotascale.extraArgs" -}}
{{- range $name, $value := .args }}
{{- if kindIs "slice" $value }}
{{- range $value }}
- {{ printf "--%s=%s" $name (include "quotascale.flagValue" .) | quote }}
{{- end }}
{{- else }}
- {{ printf "--%s=%s" $name (include "quotascale.flagValue" $value) | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
A default pod anti-affinity spreading the replicas of one component over
nodes, used when the component has more than one replica and no affinity of
its own; call with (dict "root" $ "component" "NAME").
*/}}
{{- define "quotascale.spreadAffinity" -}}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "quotascale.selectorLabels" . | nindent 12 }}
{{- end -}}

{{/*
A PodDisruptionBudget spec body; call with the component's podDisruptionBudget
values. minAvailable wins when both are set.
*/}}
{{- define "quotascale.pdbBudget" -}}
{{- if and (hasKey . "minAvailable") (not (kindIs "invalid" .minAvailable)) -}}
minAvailable: {{ include "quotascale.intOrPercent" .minAvailable }}
{{- else -}}
maxUnavailable: {{ include "quotascale.intOrPercent" (.maxUnavailable | default 1) }}
{{- end -}}
{{- end -}}

{{- define "quotascale.intOrPercent" -}}
{{- if kindIs "string" . -}}
{{- quote . -}}
{{- else -}}
{{- include "quotascale.flagValue" . -}}
{{- end -}}
{{- end -}}

{{/*
The clusterapi provider's flags: the connections of clusterAPI.mode, as
upstream's chart renders its clusterAPIMode, and --node-group-auto-discovery.
*/}}
{{- define "quotascale.autoscaler.clusterAPIArgs" -}}
{{- $capi := .Values.autoscaler.clusterAPI -}}
{{- $mode := $capi.mode -}}
{{- if eq $mode "incluster-kubeconfig" }}
- --cloud-config={{ $capi.cloudConfigPath }}
{{- else if eq $mode "kubeconfig-incluster" }}
- --kubeconfig={{ $capi.workloadKubeconfigPath }}
- --clusterapi-cloud-config-authoritative
{{- else if eq $mode "kubeconfig-kubeconfig" }}
- --kubeconfig={{ $capi.workloadKubeconfigPath }}
- --cloud-config={{ $capi.cloudConfigPath }}
{{- else if eq $mode "single-kubeconfig" }}
- --kubeconfig={{ $capi.workloadKubeconfigPath }}
{{- end }}
{{- $d := $capi.autoDiscovery -}}
{{- $keys := list -}}
{{- with $d.namespace }}{{ $keys = append $keys (printf "namespace=%s" .) }}{{ end -}}
{{- with $d.clusterName }}{{ $keys = append $keys (printf "clusterName=%s" .) }}{{ end -}}
{{- range $d.labels }}{{ range $k, $v := . }}{{ $keys = append $keys (printf "%s=%s" $k $v) }}{{ end }}{{ end -}}
{{- if $keys }}
- {{ printf "--node-group-auto-discovery=clusterapi:%s" (join "," $keys) | quote }}
{{- end }}
{{- range $d.specs }}
- {{ printf "--node-group-auto-discovery=%s" . | quote }}
{{- end }}
{{- end -}}

{{/*
The scheduler webhook's certificate, as YAML with base64 tls.crt, tls.key and
ca.crt: the Secret already in the cluster when there is one (lookup returns
nothing under `helm template`), else a new CA and a certificate for the
Service's DNS names, valid for 10 years. Memoized per render, so that the
Secret and the caBundle agree.
*/}}
{{- define "quotascale.scheduler.webhookTLS" -}}
{{- $root := . -}}
{{- if not (hasKey $root "quotascaleWebhookTLS") -}}
{{- $service := printf "%s-webhook" (include "quotascale.scheduler.fullname" $root) -}}
{{- $existing := lookup "v1" "Secret" $root.Release.Namespace (printf "%s-tls" $service) -}}
{{- $tls := dict -}}
{{- if and $existing (index ($existing.data | default dict) "ca.crt") -}}
{{- $tls = $existing.data -}}
{{- else -}}
{{- $ca := genCA (printf "%s-ca" $service) 3650 -}}
{{- $dns := list $service (printf "%s.%s" $service $root.Release.Namespace) (printf "%s.%s.svc" $service $root.Release.Namespace) (printf "%s.%s.svc.cluster.local" $service $root.Release.Namespace) -}}
{{- $cert := genSignedCert (printf "%s.%s.svc" $service $root.Release.Namespace) nil $dns 3650 $ca -}}
{{- $tls = dict "tls.crt" ($cert.Cert | b64enc) "tls.key" ($cert.Key | b64enc) "ca.crt" ($ca.Cert | b64enc) -}}
{{- end -}}
{{- $_ := set $root "quotascaleWebhookTLS" $tls -}}
{{- end -}}
{{- toYaml (get $root "quotascaleWebhookTLS") -}}
{{- end -}}

{{/*
The webhook's caBundle (base64): the generated CA, or ca.crt of
scheduler.webhook.certificateSecret.
*/}}
{{- define "quotascale.scheduler.webhookCA" -}}
{{- $secret := .Values.scheduler.webhook.certificateSecret -}}
{{- if $secret -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace $secret -}}
{{- index ($existing.data | default dict) "ca.crt" | default "" -}}
{{- else -}}
{{- index (include "quotascale.scheduler.webhookTLS" . | fromYaml) "ca.crt" -}}
{{- end -}}
{{- end -}}

{{/* The Secret the scheduler mounts its webhook certificate from. */}}
{{- define "quotascale.scheduler.webhookSecret" -}}
{{- .Values.scheduler.webhook.certificateSecret | default (printf "%s-webhook-tls" (include "quotascale.scheduler.fullname" .)) -}}
{{- end -}}

{{/*
Where the alerts' runbook_url annotations point: the runbooks of this chart's
app version by default, so that a link never changes under an installed release.
*/}}
{{- define "quotascale.runbookBaseURL" -}}
{{- $base := .Values.monitoring.prometheusRule.runbookBaseURL | default (printf "https://github.com/quotascale/quotascale/blob/%s/docs/runbooks/" .Chart.AppVersion) -}}
{{- if hasSuffix "/" $base }}{{ $base }}{{ else }}{{ $base }}/{{ end -}}
{{- end }}
