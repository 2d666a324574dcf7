{{/* Names, labels and the pieces shared by the cronjob and operator schedulers. */}}

{{- define "rbench.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "rbench.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "rbench.labels" -}}
{{ include "rbench.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "rbench.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "rbench.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "rbench.image" -}}
{{- printf "%s:%s" .Values.image.repository .Values.image.tag -}}
{{- end -}}

{{- define "rbench.claimName" -}}
{{- default (printf "%s-results" (include "rbench.fullname" .)) .Values.results.pvc.existingClaim -}}
{{- end -}}

{{- define "rbench.workloadConfigMap" -}}
{{- default (printf "%s-workload" (include "rbench.fullname" .)) .Values.workload.existingConfigMap -}}
{{- end -}}

{{/* Checks the schema cannot express; each fails with one line naming the value. */}}
{{- define "rbench.validate" -}}
{{- if and (not .Values.workload.existingConfigMap) (not .Values.clusters) -}}
{{- fail "clusters: an inline workload (workload.spec) needs at least one cluster; or set workload.existingConfigMap" -}}
{{- end -}}
{{- if hasKey (.Values.workload.spec | default dict) "clusters" -}}
{{- fail "workload.spec.clusters: list the brokers under `clusters` (their URIs come from broker.existingSecret), not in the workload" -}}
{{- end -}}
{{- $names := dict -}}
{{- range .Values.clusters -}}
{{- if hasKey $names .name -}}
{{- fail (printf "clusters: the name %q is used twice; every cluster needs its own name" .name) -}}
{{- end -}}
{{- $_ := set $names .name true -}}
{{- end -}}
{{- end -}}

{{/* The workload file: workload.spec plus the clusters, whose URIs are ${KEY} of the broker Secret. */}}
{{- define "rbench.workloadYaml" -}}
{{- $w := deepCopy (.Values.workload.spec | default dict) -}}
{{- $clusters := list -}}
{{- range .Values.clusters -}}
{{- $c := dict "name" .name "uris" (list (printf "${%s}" .uriSecretKey)) "nodes" (.nodes | default 1 | int) "instance_type" (.instanceType | default "local") "volume_type" (.volumeType | default "local") "volume_gb" (.volumeGb | default 0 | int) -}}
{{- $clusters = append $clusters $c -}}
{{- end -}}
{{- $_ := set $w "clusters" $clusters -}}
{{- toYaml $w -}}
{{- end -}}

{{- define "rbench.costsPath" -}}
{{- if .Values.prices -}}/etc/rbench/costs/costs.yaml{{- else -}}/opt/rbench/conf/costs.yaml{{- end -}}
{{- end -}}

{{/* Arguments of jobs/nightly.py: run, reduce, history update (+ regress, + upload) in one job. */}}
{{- define "rbench.nightlyArgs" -}}
- /etc/rbench/workload/{{ .Values.workload.key }}
- --out
- /results/runs
- --history
- /results/history
- --costs
- {{ include "rbench.costsPath" . }}
- --quiet
{{- if .Values.metrics.enabled }}
- --metrics-port
- {{ .Values.metrics.port | int | quote }}
- --metrics-linger
- {{ .Values.metrics.linger | quote }}
{{- end }}
{{- if .Values.history.regress }}
- --regress
{{- end }}
{{- with .Values.history.commit }}
- --commit
- {{ . | quote }}
{{- end }}
{{- if .Values.results.objectStore.enabled }}
- --upload
- {{ .Values.results.objectStore.uri | quote }}
{{- end }}
{{- end -}}

{{/* Spark configuration both schedulers share (the operator sets volumes and labels itself). */}}
{{- define "rbench.sparkConf" -}}
{{- $c := dict -}}
{{- $_ := set $c "spark.pyspark.python" "/opt/rbench/venv/bin/python" -}}
{{- range $k, $v := .Values.nodeSelector -}}
{{- $_ = set $c (printf "spark.kubernetes.node.selector.%s" $k) $v -}}
{{- end -}}
{{- range $k, $v := .Values.spark.conf -}}
{{- $_ = set $c $k (toString $v) -}}
{{- end -}}
{{- toYaml $c -}}
{{- end -}}

{{- define "rbench.volumes" -}}
- name: workload
  configMap:
    name: {{ include "rbench.workloadConfigMap" . }}
{{- if .Values.prices }}
- name: costs
  configMap:
    name: {{ include "rbench.fullname" . }}-costs
{{- end }}
- name: results
  persistentVolumeClaim:
    claimName: {{ include "rbench.claimName" . }}
{{- end -}}

{{- define "rbench.volumeMounts" -}}
- name: workload
  mountPath: /etc/rbench/workload
  readOnly: true
{{- if .Values.prices }}
- name: costs
  mountPath: /etc/rbench/costs
  readOnly: true
{{- end }}
- name: results
  mountPath: /results
{{- end -}}

{{- define "rbench.envFrom" -}}
- secretRef:
    name: {{ .Values.broker.existingSecret }}
{{- if .Values.results.objectStore.enabled }}
- secretRef:
    name: {{ .Values.results.objectStore.existingSecret }}
{{- end }}
{{- end -}}

{{- define "rbench.scrapeAnnotations" -}}
{{- if and .Values.metrics.enabled (eq .Values.metrics.mode "annotations") -}}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .Values.metrics.port | int | quote }}
prometheus.io/path: /metrics
{{- end -}}
{{- end -}}
