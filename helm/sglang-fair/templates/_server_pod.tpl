{{/* One server pod: "leader" serves HTTP (probes, scrape annotations); a LeaderWorkerSet worker only computes. */}}
{{- define "sglang-fair.serverPod" -}}
{{- $root := .root -}}
{{- $v := $root.Values -}}
metadata:
  labels:
    {{- include "sglang-fair.selector" $root | nindent 4 }}
    app.kubernetes.io/component: server
  {{- if and .leader $v.metrics.annotations }}
  annotations:
    prometheus.io/scrape: "true"
    prometheus.io/port: "30000"
    prometheus.io/path: /metrics
  {{- end }}
spec:
  {{- include "sglang-fair.podSecurity" $root | nindent 2 }}
  hostIPC: {{ $v.server.hostIPC }}
  terminationGracePeriodSeconds: 60
  affinity:
    podAntiAffinity:  # one server pod per node: it takes the node's GPUs
      requiredDuringSchedulingIgnoredDuringExecution:
        - topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- include "sglang-fair.selector" $root | nindent 14 }}
              app.kubernetes.io/component: server
  {{- with $v.server.nodeSelector }}
  nodeSelector: {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.server.tolerations }}
  tolerations: {{- toYaml . | nindent 4 }}
  {{- end }}
  containers:
    - name: server
      image: "{{ $v.image.repository }}:{{ $v.image.tag }}"
      imagePullPolicy: {{ $v.image.pullPolicy }}
      {{- include "sglang-fair.serverCommand" $root | nindent 6 }}
      env:
        - name: HF_TOKEN
          valueFrom:
            secretKeyRef: {name: {{ default "sglang-fair-hf-token" $v.hfTokenSecret }}, key: HF_TOKEN, optional: true}
      ports:
        - {name: http, containerPort: 30000}
        - {name: feedback, containerPort: 30100}
      resources:
        {{- with $v.server.resources.requests }}
        requests: {{- toYaml . | nindent 10 }}
        {{- end }}
        limits:
          nvidia.com/gpu: {{ $v.server.gpusPerNode }}
      volumeMounts:
        {{- include "sglang-fair.secretMounts" $root | nindent 8 }}
        - {name: dshm, mountPath: /dev/shm}
        - {name: hf-cache, mountPath: /home/sglang/.cache/huggingface}
        {{- if $v.modelVolume }}
        - {name: models, mountPath: /models, readOnly: true}
        {{- end }}
      {{- if .leader }}
      startupProbe:  # 503 while SGLang loads the model
        httpGet: {path: /health, port: http}
        periodSeconds: 10
        failureThreshold: {{ div (int $v.server.startupSeconds) 10 }}
      readinessProbe:
        httpGet: {path: /health, port: http}
        periodSeconds: 10
        timeoutSeconds: 5
        failureThreshold: 3
      livenessProbe:  # SGLang generates one token unless it is busy; a stalled scheduler fails within 20 s
        httpGet: {path: /health_generate, port: http}
        periodSeconds: 30
        timeoutSeconds: 25
        failureThreshold: 3
      {{- end }}
  volumes:
    {{- include "sglang-fair.secretVolumes" $root | nindent 4 }}
    - name: dshm
      emptyDir: {medium: Memory, sizeLimit: {{ $v.server.shmSize }}}
    - name: hf-cache
      {{- toYaml $v.hfCache | nindent 6 }}
    {{- if $v.modelVolume }}
    - name: models
      {{- toYaml $v.modelVolume | nindent 6 }}
    {{- end }}
{{- end -}}
