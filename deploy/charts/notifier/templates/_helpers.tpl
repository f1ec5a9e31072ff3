{{/* The chart's name, or nameOverride. */}}
{{- define "notifier.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The objects' name: fullnameOverride, else the release's name when it holds the chart's, else both. */}}
{{- define "notifier.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "notifier.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* What selects the pods: the same two labels kubewatch's chart selects on. */}}
{{- define "notifier.selectorLabels" -}}
app.kubernetes.io/name: {{ include "notifier.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Every object's labels. */}}
{{- define "notifier.labels" -}}
{{ include "notifier.selectorLabels" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kloop
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.commonLabels }}
{{ include "notifier.render" (dict "value" . "context" $) }}
{{- end }}
{{- end -}}

{{/* metadata's labels and annotations of every object. */}}
{{- define "notifier.meta" -}}
labels:
  {{- include "notifier.labels" . | nindent 2 }}
{{- with .Values.commonAnnotations }}
annotations:
  {{- include "notifier.render" (dict "value" . "context" $) | nindent 2 }}
{{- end }}
{{- end -}}

{{/* A value as YAML, rendered as a template when it is a string (kubewatch's chart evaluates these values). */}}
{{- define "notifier.render" -}}
{{- if typeIs "string" .value -}}
{{- tpl .value .context -}}
{{- else -}}
{{- tpl (toYaml .value) .context -}}
{{- end -}}
{{- end -}}

{{- define "notifier.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "notifier.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
The image. A kubewatch image in image.repository (a kubewatch values file may pin it) means this chart's
default: the notifier, not kubewatch, reads the config below.
*/}}
{{- define "notifier.image" -}}
{{- $repo := .Values.image.repository -}}
{{- $tag := .Values.image.tag | toString -}}
{{- if regexMatch "(^|/)kubewatch(-archived)?$" $repo -}}
{{- $repo = "kloop.local/notifier" -}}
{{- $tag = "dev" -}}
{{- end -}}
{{- $registry := default .Values.image.registry .Values.global.imageRegistry -}}
{{- if $registry -}}
{{- printf "%s/%s:%s" $registry $repo $tag -}}
{{- else -}}
{{- printf "%s:%s" $repo $tag -}}
{{- end -}}
{{- end -}}

{{/*
The notifier's .kubewatch.yaml, in kubewatch's format: each enabled handler with its values (enabled
included, which the notifier reads), extraHandlers, the kinds, the custom resources and the namespace.
Empty strings are left out, as unset: kubewatch's chart writes them, and kubewatch then fails to start on
smtp's requireTLS: "".
*/}}
{{- define "notifier.config" -}}
{{- $handlers := dict -}}
{{- range $name := list "slack" "slackwebhook" "hipchat" "mattermost" "flock" "msteams" "webhook" "cloudevent" "lark" "smtp" -}}
{{- $h := index $.Values $name -}}
{{- if and $h $h.enabled -}}
{{- $out := dict -}}
{{- range $k, $v := $h -}}
{{- if kindIs "map" $v -}}
{{- $sub := dict -}}
{{- range $sk, $sv := $v -}}
{{- if ne (toString $sv) "" }}{{ $_ := set $sub $sk $sv }}{{ end -}}
{{- end -}}
{{- if $sub }}{{ $_ := set $out $k $sub }}{{ end -}}
{{- else if ne (toString $v) "" -}}
{{- $_ := set $out $k $v -}}
{{- end -}}
{{- end -}}
{{- $_ := set $handlers $name $out -}}
{{- end -}}
{{- end -}}
{{- range $name, $h := .Values.extraHandlers -}}
{{- $_ := set $handlers $name $h -}}
{{- end -}}
{{- $cfg := dict "handler" $handlers "resource" (.Values.resourcesToWatch | default dict) "customresources" (.Values.customresources | default list) "namespace" (.Values.namespaceToWatch | default "") -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/*
The API group and resource of each of the notifier's resource keys, "group/resource": kubewatch's keys and
the notifier's own, by their canonical names (the notifier's short aliases, such as po or deploy, would name
a kind twice next to this chart's defaults, which the notifier refuses). The deploy module's tests check it
against the notifier's own table (notifier.ClusterRole).
*/}}
{{- define "notifier.resourceTable" -}}
{{- dict
  "deployment" "apps/deployments" "replicationcontroller" "/replicationcontrollers" "replicaset" "apps/replicasets"
  "daemonset" "apps/daemonsets" "statefulset" "apps/statefulsets" "services" "/services" "pod" "/pods"
  "job" "batch/jobs" "node" "/nodes" "clusterrole" "rbac.authorization.k8s.io/clusterroles"
  "clusterrolebinding" "rbac.authorization.k8s.io/clusterrolebindings" "serviceaccount" "/serviceaccounts"
  "persistentvolume" "/persistentvolumes" "namespace" "/namespaces" "secret" "/secrets" "configmap" "/configmaps"
  "ingress" "networking.k8s.io/ingresses" "hpa" "autoscaling/horizontalpodautoscalers" "event" "events.k8s.io/events"
  "coreevent" "/events"
  | toYaml -}}
{{- end -}}

{{/*
The ClusterRole's rules for the watched kinds: list and watch, one rule per API group (groups and resources
sorted), as `notifier config rbac` prints them. Keys the notifier does not know get no rule (it warns and
ignores them).
*/}}
{{- define "notifier.watchRules" -}}
{{- $table := include "notifier.resourceTable" . | fromYaml -}}
{{- $byGroup := dict -}}
{{- range $key, $on := .Values.resourcesToWatch -}}
{{- $gr := index $table (lower $key) -}}
{{- if and $gr (eq (toString $on) "true") -}}
{{- $group := regexReplaceAll "/[^/]*$" $gr "" -}}
{{- $res := regexReplaceAll "^.*/" $gr "" -}}
{{- $_ := set $byGroup $group (append (get $byGroup $group | default list) $res) -}}
{{- end -}}
{{- end -}}
{{- range .Values.customresources -}}
{{- $_ := set $byGroup (.group | default "") (append (get $byGroup (.group | default "") | default list) .resource) -}}
{{- end -}}
{{- range $group := keys $byGroup | sortAlpha }}
- apiGroups: [{{ $group | quote }}]
  resources: {{ get $byGroup $group | uniq | sortAlpha | toJson }}
  verbs: ["list", "watch"]
{{- end -}}
{{- end -}}

{{/* The namespace of the checkpoint ConfigMap: the watched namespace, else the release's (the pod's). */}}
{{- define "notifier.checkpointNamespace" -}}
{{- default .Release.Namespace .Values.namespaceToWatch -}}
{{- end -}}
