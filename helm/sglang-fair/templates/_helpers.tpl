{{/* The release's base name: every object is named after it. */}}
{{- define "sglang-fair.fullname" -}}
{{- default .Release.Name .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{- define "sglang-fair.labels" -}}
app.kubernetes.io/name: sglang-fair
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "sglang-fair.selector" -}}
app.kubernetes.io/name: sglang-fair
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Server i's base URL: the StatefulSet's pod (or the LeaderWorkerSet group's leader) by its stable DNS name. */}}
{{- define "sglang-fair.serverUrl" -}}
{{- $name := printf "%s-server" (include "sglang-fair.fullname" .root) -}}
http://{{ $name }}-{{ .index }}.{{ $name }}.{{ .root.Release.Namespace }}.svc.{{ .root.Values.clusterDomain }}:30000
{{- end -}}

{{- define "sglang-fair.workerUrls" -}}
{{- $urls := list -}}
{{- range $i := until (int .Values.server.replicas) -}}
{{- $urls = append $urls (include "sglang-fair.serverUrl" (dict "root" $ "index" $i)) -}}
{{- end -}}
{{- join "," $urls -}}
{{- end -}}

{{/* DP workers per server: its GPUs over the tensor-parallel size (one worker when it spans nodes). */}}
{{- define "sglang-fair.dpSize" -}}
{{- if .Values.server.multiNode.enabled -}}1{{- else -}}
{{- if ne (mod (int .Values.server.gpusPerNode) (int .Values.server.tpSize)) 0 -}}
{{- fail "server.gpusPerNode must be a multiple of server.tpSize" -}}
{{- end -}}
{{- div (int .Values.server.gpusPerNode) (int .Values.server.tpSize) -}}
{{- end -}}
{{- end -}}

{{/* The server's command (the image's ENTRYPOINT, written out) and its flags. */}}
{{- define "sglang-fair.serverCommand" -}}
command: ["sglang-fair", "serve", "--host", "0.0.0.0", "--port", "30000"]
args:
  - --model-path
  - {{ .Values.model | quote }}
  - --dp-size
  - {{ include "sglang-fair.dpSize" . | quote }}
  {{- if .Values.server.multiNode.enabled }}
  - --tp-size
  - {{ mul .Values.server.gpusPerNode .Values.server.multiNode.nodesPerServer | quote }}
  - --nnodes
  - {{ .Values.server.multiNode.nodesPerServer | quote }}
  - --node-rank
  - $(LWS_WORKER_INDEX)
  - --dist-init-addr
  - {{ printf "$(LWS_LEADER_ADDRESS):%d" (int .Values.server.multiNode.distInitPort) | quote }}
  {{- else if gt (int .Values.server.tpSize) 1 }}
  - --tp-size
  - {{ .Values.server.tpSize | quote }}
  {{- end }}
  - --schedule-policy
  - {{ .Values.server.schedulePolicy }}
  - --fair-quantum
  - {{ .Values.server.fairQuantum | quote }}
  - --client-keys
  - /etc/sglang-fair/keys/keys.txt
  - --fairness-admins
  - {{ .Values.fairnessAdmins | quote }}
  - --gateway-token-file
  - /etc/sglang-fair/token/gateway.token
  - --enable-metrics
  - --feedback-port
  - "30100"
  - --feedback-host
  - 0.0.0.0
  - --feedback-keys
  - /etc/sglang-fair/feedback
  {{- range .Values.server.extraArgs }}
  - {{ . | quote }}
  {{- end }}
{{- end -}}

{{/* The files every server and gateway reads, from the operator's Secrets (uid 10001 reads them through fsGroup). */}}
{{- define "sglang-fair.secretVolumes" -}}
- name: keys
  secret: {secretName: {{ .Values.secrets.keys }}, defaultMode: 0440}
- name: token
  secret: {secretName: {{ .Values.secrets.gatewayToken }}, defaultMode: 0440}
- name: feedback
  secret: {secretName: {{ .Values.secrets.feedbackKeys }}, defaultMode: 0440}
{{- end -}}

{{- define "sglang-fair.secretMounts" -}}
- {name: keys, mountPath: /etc/sglang-fair/keys, readOnly: true}
- {name: token, mountPath: /etc/sglang-fair/token, readOnly: true}
- {name: feedback, mountPath: /etc/sglang-fair/feedback, readOnly: true}
{{- end -}}

{{- define "sglang-fair.podSecurity" -}}
securityContext:
  runAsUser: 10001
  runAsGroup: 10001
  fsGroup: 10001
  runAsNonRoot: true
{{- with .Values.imagePullSecrets }}
imagePullSecrets: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
