#!/usr/bin/env bash
# Build the images and run the compose `fleet-cpu` and `cpu` profiles for real, then check them as a user would
# (docs/guides/deploy.md, "What was and was not verified here").   usage: scripts/docker_check.sh [--keep]
# As root on a machine without a Docker engine it installs Debian's docker.io and starts dockerd (no iptables
# rules, no IP forwarding, no default bridge; where the FORWARD chain drops bridged traffic, one rule, removed
# at the end, lets traffic within Docker bridges through); where no image registry answers it makes the bases from
# Debian's packages (debootstrap; docker/local/). Steps, each timed; the first that fails ends the run with
# exit code 1 and its name:
#   engine       a Docker engine and a compose command (the v2 plugin if present, else Debian's v1); every
#                profile of docker/compose.yaml valid for it
#   bases        python:3.11.7-slim-bookworm and debian:bookworm-slim if present or pullable, else local stand-ins
#   build        the CPU image, through compose (docker/compose.yaml + docker/compose.check.yaml); HAProxy's and
#                Prometheus's images from Debian's packages (docker/haproxy/, docker/prometheus/)
#   keys         feedback keys made by the image's `sglang-fair keys`; a missing keys, token or feedback-keys
#                source stops `up`; a keys file uid 10001 cannot read stops the server (exit 2)
#   fleet-up     compose --profile fleet-cpu up (compose.yaml alone, the keys of docker/keys.example.txt, a
#                generated gateway token): both servers healthy (started together), then both gateways healthy,
#                HAProxy in front of them; with --profile monitoring, Prometheus (the admin's key to scrape)
#   probe        lab docker-probe at server A: chat 200 with a key, 401 with a wrong or no key,
#                /fairness, /metrics
#   fleet-probe  lab fleet-probe: a keyed chat through the gateway 200, a wrong key 401, a pinned
#                routed_dp_rank straight to each server 403 (no token), /gateway/state: both servers'
#                workers, requests routed to each, every worker's heartbeats over the CurveZMQ feedback ports
#   monitoring   promtool accepts the configuration in the Prometheus container; lab monitoring-probe:
#                every target (2 servers, 2 gateways, HAProxy) scraped and up; chats through HAProxy 200 and the
#                client's series move (its service at the servers, its answers at the gateways); every query of
#                the Grafana dashboard valid, each with data (the router's panels: valid; no router here)
#   replicas     gateway-2 hears the first gateway both ways (CurveZMQ peer ports) and recorded its
#                dispatches; the first killed (compose kill): HAProxy's health check takes it out, chats
#                through gateway-2 and through HAProxy still 200; started again: healthy, HAProxy takes it
#                back, and it records gateway-2's dispatches
#   user         server A and the gateway run as uid 10001, the keys and token mounts are read-only, the
#                image's HEALTHCHECK command passes
#   health       server A stopped (SIGSTOP): the gateway takes it out, unhealthy; resumed: healthy, and the
#                gateway takes it back and routes to it
#   failover     server B killed (compose kill): the gateway takes it out, chats through the gateway still
#                200; compose start B (it boots during the next step)
#   gpu          docker/Dockerfile on a stand-in for SGLang's image (built in the background since the build
#                step): selfcheck, entry point, user, volumes, and its HEALTHCHECK command against server A
#   taken-back   server B healthy again; the gateway takes it back and routes to it
#   fleet-down   compose down leaves no container or network of the project
#   try          the cpu profile as docs/guides/deploy.md's "Try it on CPU" runs it (compose.yaml alone, no keys):
#                up, healthy, a chat naming its client in X-Client-Id, /fairness and /metrics show it; down
# --keep leaves the engine running and the images in place (a second run then skips the bases). Without it,
# the script removes what it made (containers, volumes, its images and bases) and stops a dockerd it started.
# --prepare runs only engine, bases and build (and builds the gpu step's image), and leaves them for the next
# run, which then stops a dockerd the --prepare run started (.ci/run prepares while the tests run: the steps
# mostly wait on the network and run at nice 19, so the tests keep the cores).
# Settings: SGLANG_FAIR_CHECK_NICE (19: heavy steps and a dockerd started here run at low priority),
# SGLANG_FAIR_CHECK_STORAGE_DRIVER (dockerd's choice; vfs where overlay2 cannot mount), SGLANG_FAIR_CHECK_WHEELS
# (a folder with the CPU torch wheel; default: pip's find-links folders), SGLANG_FAIR_CHECK_PYTHON312
# (a self-contained Python 3.12 prefix for the SGLang stand-in; default: python3.12's), SGLANG_FAIR_CHECK_SGLANG_IMAGE
# (a real SGLang image to build docker/Dockerfile on instead of the stand-in), SGLANG_FAIR_CHECK_MIN_FREE_GB (20)
# and SGLANG_FAIR_CHECK_MIN_FREE_PREPARED_GB (8: when a --prepare run left every image, the run builds from cache).
# shellcheck disable=SC2015,SC2016  # `A && B || die` is meant; single quotes: expanded in the container
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=scripts/docker_check_lib.sh
source "$ROOT/scripts/docker_check_lib.sh"

KEEP=0 PREPARE=0
for arg in "$@"; do
  case "$arg" in
    --keep) KEEP=1 ;;
    --prepare) PREPARE=1 KEEP=1 ;;
    *) die "unknown argument $arg (usage: scripts/docker_check.sh [--keep | --prepare])" ;;
  esac
done
NICE="${SGLANG_FAIR_CHECK_NICE:-19}"
STORAGE_DRIVER="${SGLANG_FAIR_CHECK_STORAGE_DRIVER:-}"
PYTHON312_PREFIX="${SGLANG_FAIR_CHECK_PYTHON312:-}"
MIN_FREE_GB="${SGLANG_FAIR_CHECK_MIN_FREE_GB:-20}"
MIN_FREE_PREPARED_GB="${SGLANG_FAIR_CHECK_MIN_FREE_PREPARED_GB:-8}"  # a run on prepared images used under 5
PULL_TIMEOUT=120
# compose's client gives the engine 60 s per request; on 2 cores busy booting two servers the engine answered later
# (CI, stop 50: "Read timed out" creating gateway-2). A user's own setting wins.
export COMPOSE_HTTP_TIMEOUT="${COMPOSE_HTTP_TIMEOUT:-600}" DOCKER_CLIENT_TIMEOUT="${DOCKER_CLIENT_TIMEOUT:-600}"
DEBIAN_MIRROR="http://deb.debian.org/debian"
OFFICIAL_PYTHON="python:3.11.7-slim-bookworm"
LOCAL_DEBIAN="sglang-fair-local/debian:bookworm"
LOCAL_PYTHON="sglang-fair-local/python:3.11-bookworm"
LOCAL_SGLANG="sglang-fair-local/sglang:0.5.23-standin"
OFFICIAL_DEBIAN="debian:bookworm-slim"
OPS_IMAGES=(sglang-fair-haproxy:0.1.0 sglang-fair-prometheus:0.1.0)  # the compose file's names for them
CPU_IMAGE="sglang-fair-cpu:0.1.0"  # the compose file's name for it
GPU_IMAGE="sglang-fair:0.1.0-check"
all_images_present() {
  local image
  for image in "$CPU_IMAGE" "$GPU_IMAGE" "${OPS_IMAGES[@]}"; do have_image "$image" || return 1; done
}
PROJECT="sglang-fair-check"
GPU_VOLUMES=(sglang-fair-check-models sglang-fair-check-hf)
ENGINE_PID=/run/sglang-fair-check-dockerd.pid
ENGINE_OWNED="$ENGINE_PID.prepared"  # a --prepare run started the engine (holds whether it opened the bridges)
WORK="$(mktemp -d /tmp/sglang-fair-docker-check.XXXXXX)"
STARTED_ENGINE=0 OPENED_BRIDGES=0 WHEEL_SERVER="" CONTAINER="" COMPOSE_USED=0 STEP="" STEP_START=0 BOOTING=""
GPU_BUILD=""  # the background build of the gpu step's image (started after the build step)
TIMES=() COMPOSE=() COMPOSE_NAME=""
START="$(date +%s)"

finish_step() { [[ -n "$STEP" ]] && TIMES+=("$(printf '%-11s %5d s' "$STEP" $(( $(date +%s) - STEP_START )))"); STEP=""; }
step() { finish_step; STEP="$1"; STEP_START="$(date +%s)"; say "== $1 ($(date -u +%H:%M:%S) UTC)"; }
compose() {  # the cpu profile's build as this check runs it (docker/compose.check.yaml)
  "${COMPOSE[@]}" -p "$PROJECT" -f "$ROOT/docker/compose.yaml" -f "$ROOT/docker/compose.check.yaml" --profile cpu "$@"
}
plain() { "${COMPOSE[@]}" -p "$PROJECT" -f "$ROOT/docker/compose.yaml" --profile cpu "$@"; }  # as users run it
fleet() { "${COMPOSE[@]}" -p "$PROJECT" -f "$ROOT/docker/compose.yaml" --profile fleet-cpu "$@"; }  # as users run it
monitored() { fleet --profile monitoring "$@"; }  # the fleet with Prometheus beside it
up_detached() {  # `RUN up -d --no-build ARGS` into LOG; once more if the engine answered after compose gave up
  local run="$1" log="$2"; shift 2
  "$run" up -d --no-build "$@" >"$log" 2>&1 && return 0
  grep -q "timed out" "$log" || return 1
  say "compose up: $(grep -m1 -o '[A-Za-z]* timed out.*' "$log"); up once more (it is idempotent)"
  "$run" up -d --no-build "$@" >>"$log" 2>&1
}
lab() {  # sglang-fair's probes (`sglang-fair lab NAME`), standard library only: any python3 on the host
  PYTHONPATH="$ROOT/python" python3 -m sglang_fair.lab "$@"
}
monitoring_probe() {  # lab monitoring-probe against the published Prometheus
  lab monitoring-probe --prometheus "http://$PROMETHEUS_PORT" "$@" | sed 's/^/docker_check: monitoring: /'
  [[ "${PIPESTATUS[0]}" == 0 ]] || die "monitoring did not show what an operator expects (above)"
}
fleet_probe_at() {  # lab fleet-probe against one gateway (its published port, its container)
  local port="$1" container="$2"; shift 2
  lab fleet-probe --gateway "http://$port" --key "$KEY" \
    --servers "http://$FLEET_PORT_A,http://$FLEET_PORT_B" "$@" | sed 's/^/docker_check: fleet: /'
  [[ "${PIPESTATUS[0]}" == 0 ]] && return
  docker logs "$container" >"$WORK/gateway.log" 2>&1 || true
  die "the fleet did not answer as a user expects (above); the gateway said: $(grep -v '^INFO' "$WORK/gateway.log" | tail -8)"
}
fleet_probe() { fleet_probe_at "$GATEWAY_PORT" "$GATEWAY" "$@"; }  # the first gateway replica
service_container() {  # the container of a fleet-cpu service
  local id
  id="$(fleet ps -q "$1")"
  [[ -n "$id" ]] || die "compose ps shows no $1 container"
  echo "$id"
}
probe() {
  lab docker-probe --base-url "http://$PORT" "$@" | sed 's/^/docker_check: probe: /'
  [[ "${PIPESTATUS[0]}" == 0 ]] || die "the server did not answer as a user expects (above)"
}
down_and_check() {  # compose down (with the given compose function), then nothing of the project is left
  "$@" down >"$WORK/down.log" 2>&1 || die "compose down failed: $(tail -5 "$WORK/down.log")"
  CONTAINER=""
  local left nets
  left="$(docker ps -a -q --filter "label=com.docker.compose.project=$PROJECT")"
  nets="$(docker network ls -q --filter "label=com.docker.compose.project=$PROJECT")"
  [[ -z "$left$nets" ]] || die "after down: containers [$left] networks [$nets] of $PROJECT remain"
  say "down: no container or network of $PROJECT left"
}

cleanup() {
  set +e
  [[ -n "$GPU_BUILD" ]] && { pkill -P "$GPU_BUILD"; kill "$GPU_BUILD"; wait "$GPU_BUILD"; } 2>/dev/null
  [[ -n "$CONTAINER" ]] && kill -CONT "$(docker inspect -f '{{.State.Pid}}' "$CONTAINER" 2>/dev/null)" 2>/dev/null
  [[ "$COMPOSE_USED" == 1 ]] && monitored down -v --remove-orphans >/dev/null 2>&1 && compose down -v --remove-orphans >/dev/null 2>&1
  [[ -n "$WHEEL_SERVER" ]] && kill "$WHEEL_SERVER" 2>/dev/null
  if docker info >/dev/null 2>&1; then
    docker volume rm "${GPU_VOLUMES[@]}" >/dev/null 2>&1
    if [[ "$KEEP" == 0 ]]; then
      docker rmi "$CPU_IMAGE" "$GPU_IMAGE" "${OPS_IMAGES[@]}" "$LOCAL_SGLANG" "$LOCAL_PYTHON" "$LOCAL_DEBIAN" >/dev/null 2>&1
      docker image prune -f >/dev/null 2>&1
    fi
  fi
  [[ "$KEEP" == 0 ]] && stop_engine
  rm -rf "$WORK/rootfs" "$WORK/sglang-context"
}
on_exit() {
  local rc=$?
  if (( rc )); then echo "docker_check: FAILED at step '$STEP' (logs in $WORK)" >&2; else finish_step; fi
  cleanup
  (( rc )) || rm -rf "$WORK"
  printf 'docker_check: %s\n' "${TIMES[@]}" "total   $(( $(date +%s) - START )) s" "compose: $COMPOSE_NAME"
  exit "$rc"
}
trap on_exit EXIT

step engine
ensure_engine
ensure_compose
for profile in gpu dp cpu fleet fleet-cpu monitoring; do  # the file users run, as this compose command reads it
  "${COMPOSE[@]}" -f "$ROOT/docker/compose.yaml" --profile "$profile" config -q >"$WORK/config.log" 2>&1 \
    || die "docker/compose.yaml (profile $profile) is invalid for $COMPOSE_NAME: $(cat "$WORK/config.log")"
done
say "compose: $COMPOSE_NAME; docker/compose.yaml valid for it (profiles gpu, dp, cpu, fleet, fleet-cpu, monitoring)"
free_gb="$(df -P --block-size=1G "$(docker info -f '{{.DockerRootDir}}')" | awk 'NR == 2 {print $4}')"
need_gb="$MIN_FREE_GB" made="nothing made yet"
if all_images_present; then need_gb="$MIN_FREE_PREPARED_GB" made="images already built"; fi
(( free_gb >= need_gb )) || die "$free_gb GB free under $(docker info -f '{{.DockerRootDir}}'), the check needs $need_gb ($made)"
say "disk: $free_gb GB free, $need_gb needed ($made)"

step bases
if official_image "$OFFICIAL_PYTHON"; then
  PYTHON_IMAGE="$OFFICIAL_PYTHON"; say "base: $OFFICIAL_PYTHON (official)"
else
  say "base: $OFFICIAL_PYTHON cannot be pulled here; making a local stand-in"
  make_debian_base
  have_image "$LOCAL_PYTHON" || build_local python "$LOCAL_PYTHON" "$WORK"
  PYTHON_IMAGE="$LOCAL_PYTHON"
fi
if official_image "$OFFICIAL_DEBIAN"; then
  DEBIAN_IMAGE="$OFFICIAL_DEBIAN"; say "base: $OFFICIAL_DEBIAN (official) for HAProxy and Prometheus"
else
  make_debian_base
  DEBIAN_IMAGE="$LOCAL_DEBIAN"
fi
wheels="$(find_torch_wheels)"
if [[ -n "$wheels" ]]; then
  serve_wheels "$wheels"; TORCH_INDEX=""
  say "torch: the CPU wheel in $wheels, served at $FIND_LINKS for the build"
elif curl -sf -m 20 -o /dev/null https://download.pytorch.org/whl/cpu/torch/; then
  FIND_LINKS=""; TORCH_INDEX="https://download.pytorch.org/whl/cpu"; say "torch: PyTorch's CPU index"
else
  die "no CPU torch 2.13.0 wheel: PyTorch's CPU index does not answer and SGLANG_FAIR_CHECK_WHEELS names no folder with it"
fi

step build
mapfile -t ports < <(free_ports 8)
export PORT="127.0.0.1:${ports[0]}" GATEWAY_PORT="127.0.0.1:${ports[1]}" GATEWAY_PORT_2="127.0.0.1:${ports[4]}"
export LB_PORT="127.0.0.1:${ports[5]}" LB_STATS_PORT="127.0.0.1:${ports[6]}" PROMETHEUS_PORT="127.0.0.1:${ports[7]}"
export FLEET_PORT_A="127.0.0.1:${ports[2]}" FLEET_PORT_B="127.0.0.1:${ports[3]}"
export SGLANG_FAIR_KEYS="$WORK/keys.txt" OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
export SGLANG_FAIR_GATEWAY_TOKEN="$WORK/gateway.token"
python3 -c 'import secrets; print(secrets.token_hex(32))' >"$SGLANG_FAIR_GATEWAY_TOKEN"  # openssl rand -hex 32
chmod 0644 "$SGLANG_FAIR_GATEWAY_TOKEN"
export CHECK_PYTHON_IMAGE="$PYTHON_IMAGE" CHECK_TORCH_INDEX="$TORCH_INDEX" CHECK_PIP_FIND_LINKS="$FIND_LINKS"
grep -v '^#' "$ROOT/docker/keys.example.txt" >"$SGLANG_FAIR_KEYS"
mapfile -t key_lines <"$SGLANG_FAIR_KEYS"
read -r KEY CLIENT _ <<<"${key_lines[0]}"    # the admin: reads /fairness and /metrics
read -r OTHER_KEY _ <<<"${key_lines[1]}"
export FAIRNESS_ADMINS="$CLIENT"
export SGLANG_FAIR_SCRAPE_KEY="$WORK/scrape.key"  # Prometheus scrapes /metrics with the admin's key
echo "$KEY" >"$SGLANG_FAIR_SCRAPE_KEY" && chmod 0644 "$SGLANG_FAIR_SCRAPE_KEY"
COMPOSE_USED=1
low "${COMPOSE[@]}" -p "$PROJECT" -f "$ROOT/docker/compose.yaml" -f "$ROOT/docker/compose.check.yaml" \
  --profile cpu build >"$WORK/build-cpu.log" 2>&1 || die "compose build failed: $(tail -15 "$WORK/build-cpu.log")"
grep -E "modules imported|^ok$|tiny llama" "$WORK/build-cpu.log" | sed 's/^/docker_check: build: /' || true
for ops in haproxy prometheus; do  # the images compose.yaml names, on the Debian base
  low docker build --network host --build-arg DEBIAN_IMAGE="$DEBIAN_IMAGE" -t "sglang-fair-$ops:0.1.0" "$ROOT/docker/$ops" \
    >"$WORK/build-$ops.log" 2>&1 || die "building docker/$ops/Dockerfile failed: $(tail -10 "$WORK/build-$ops.log")"
done
say "build: $(docker run --rm --network none --entrypoint haproxy sglang-fair-haproxy:0.1.0 -v | head -1); $(docker run --rm --network none --entrypoint prometheus sglang-fair-prometheus:0.1.0 --version 2>&1 | head -1)"
# The gpu step's image is built meanwhile (the stand-in for SGLang's image, then docker/Dockerfile on it):
# the steps until then mostly wait for servers to boot. Its output is shown, and its failure named, there.
build_gpu_image() {
  local sglang_image="${SGLANG_FAIR_CHECK_SGLANG_IMAGE:-}"
  if [[ -z "$sglang_image" ]]; then
    if ! have_image "$LOCAL_SGLANG"; then
      make_debian_base
      copy_python312 "$WORK/sglang-context"
      build_local sglang "$LOCAL_SGLANG" "$WORK/sglang-context"
    fi
    sglang_image="$LOCAL_SGLANG"
  fi
  low docker build --network host -f "$ROOT/docker/Dockerfile" --build-arg SGLANG_IMAGE="$sglang_image" \
    -t "$GPU_IMAGE" "$ROOT" >"$WORK/build-gpu.log" 2>&1 \
    || die "docker/Dockerfile on $sglang_image failed: $(tail -15 "$WORK/build-gpu.log")"
}
if [[ "$PREPARE" == 1 ]]; then
  build_gpu_image
  [[ "$STARTED_ENGINE" == 1 ]] && echo "$OPENED_BRIDGES" >"$ENGINE_OWNED"  # the next run stops it
  say "prepared: the engine, the bases and both images are left for the next run"
  exit 0
fi
build_gpu_image >"$WORK/gpu-build.log" 2>&1 &
GPU_BUILD=$!

step keys
export SGLANG_FAIR_FEEDBACK_KEYS="$WORK/feedback-keys"  # `sglang-fair keys`, run by the image's own install
docker run --rm --network none --user 0 --entrypoint sglang-fair -v "$WORK:/out" "$CPU_IMAGE" \
  keys /out/feedback-keys --gateway-names gateway,gateway-2 >"$WORK/feedback-keys.log" 2>&1 || die "sglang-fair keys failed: $(tail -3 "$WORK/feedback-keys.log")"
chown -R 10001:10001 "$SGLANG_FAIR_FEEDBACK_KEYS"  # the image's user reads them; the secret keys stay 0600
say "feedback keys: $(ls "$SGLANG_FAIR_FEEDBACK_KEYS" | tr '\n' ' ')"
for missing in SGLANG_FAIR_KEYS SGLANG_FAIR_GATEWAY_TOKEN SGLANG_FAIR_FEEDBACK_KEYS; do
  if env "$missing=$WORK/absent.txt" "${COMPOSE[@]}" -p "$PROJECT" -f "$ROOT/docker/compose.yaml" --profile fleet-cpu \
      up -d --no-build >"$WORK/up-absent.log" 2>&1; then
    die "compose up (fleet-cpu) started with a missing file in $missing"
  fi
  say "a missing $missing file stops up: $(grep -m1 -o 'bind source path does not exist.*' "$WORK/up-absent.log" || tail -1 "$WORK/up-absent.log")"
  fleet down >/dev/null 2>&1
done
install -m 0600 "$SGLANG_FAIR_KEYS" "$WORK/keys-0600.txt"
rc=0
docker run --rm --network none -v "$WORK/keys-0600.txt:/etc/sglang-fair/keys.txt:ro" "$CPU_IMAGE" \
  --model-path /models/tiny-llama --client-keys /etc/sglang-fair/keys.txt >"$WORK/keys-0600.log" 2>&1 || rc=$?
[[ "$rc" == 2 ]] && grep -q "Permission denied" "$WORK/keys-0600.log" \
  || die "a keys file mode 0600 (root) should stop the server with exit 2 naming the permission; got $rc: $(tail -3 "$WORK/keys-0600.log")"
say "keys file 0600 root: exit 2, $(grep -m1 'Permission denied' "$WORK/keys-0600.log")"
chmod 0644 "$SGLANG_FAIR_KEYS"

step fleet-up  # docs/guides/deploy.md, "Several nodes": two servers and the gateway, started by one command
up_start="$(date +%s)"  # compose starts both servers at once and the gateway once both are healthy
up_detached fleet "$WORK/up-fleet.log" || die "compose up (fleet-cpu) failed: $(tail -5 "$WORK/up-fleet.log")"
CONTAINER="$(service_container sglang-fair-cpu-a)"
B_CONTAINER="$(service_container sglang-fair-cpu-b)"
GATEWAY="$(service_container sglang-fair-cpu-gateway)"
waited="$(wait_health "$CONTAINER" healthy 600)"  # assignments: a failed wait ends the run
waited="$(wait_health "$B_CONTAINER" healthy 600)"
say "servers A and B healthy, the gateway started: $(( $(date +%s) - up_start )) s after up"
GATEWAY_2="$(service_container sglang-fair-cpu-gateway-2)"
waited="$(wait_health "$GATEWAY" healthy 300)"
say "gateway healthy $waited s later (published on $GATEWAY_PORT): $(docker logs "$GATEWAY" 2>&1 | grep -m1 'sglang-fair gateway:')"
waited="$(wait_health "$GATEWAY_2" healthy 300)"
say "gateway-2 healthy $waited s later (published on $GATEWAY_PORT_2)"
LB="$(service_container sglang-fair-cpu-lb)"
waited="$(wait_health "$LB" healthy 60)"
up_detached monitored "$WORK/up-monitoring.log" prometheus || die "compose up prometheus failed: $(tail -5 "$WORK/up-monitoring.log")"
PROMETHEUS="$(monitored ps -q prometheus)"
waited="$(wait_health "$PROMETHEUS" healthy 120)"
say "HAProxy healthy (published on $LB_PORT), Prometheus healthy (on $PROMETHEUS_PORT)"

step probe  # server A, published on FLEET_PORT_A
PORT="$FLEET_PORT_A" probe --client "$CLIENT" --key "$KEY" --other-key "$OTHER_KEY"

step fleet-probe
fleet_probe check

step monitoring  # docs/guides/deploy.md, "Monitoring": Prometheus scrapes everything; the dashboard's queries answer
docker exec "$PROMETHEUS" promtool check config /etc/prometheus/prometheus.yml >"$WORK/promtool.log" 2>&1 \
  || die "promtool rejects the configuration: $(cat "$WORK/promtool.log")"
say "monitoring: promtool: $(grep -c SUCCESS "$WORK/promtool.log") file(s) SUCCESS (the configuration and its rules)"
monitoring_probe targets --expect sglang-fair=2,sglang-fair-gateway=2,haproxy=1
monitoring_probe moves --lb "http://$LB_PORT" --key "$KEY" --client "$CLIENT"
monitoring_probe dashboard --file "$ROOT/docker/grafana/dashboards/sglang-fair.json"

step replicas  # docs/guides/deploy.md, "Two gateways": they share what they route; one killed, the other serves
fleet_probe_at "$GATEWAY_PORT_2" "$GATEWAY_2" peers --count 1
fleet kill sglang-fair-cpu-gateway >"$WORK/kill-gw.log" 2>&1 || die "compose kill failed: $(tail -3 "$WORK/kill-gw.log")"
fleet_probe_at "$GATEWAY_PORT_2" "$GATEWAY_2" chats --count 4
monitoring_probe --wait 30 lb --stats "http://$LB_STATS_PORT" --server gateway-1 --state DOWN
fleet_probe_at "$LB_PORT" "$LB" chats --count 4  # through HAProxy: only gateway-2 serves
fleet start sglang-fair-cpu-gateway >"$WORK/start-gw.log" 2>&1 || die "compose start failed: $(tail -3 "$WORK/start-gw.log")"
waited="$(wait_health "$GATEWAY" healthy 300)"
monitoring_probe --wait 30 lb --stats "http://$LB_STATS_PORT" --server gateway-1 --state UP
say "the first gateway killed, gateway-2 served, directly and through HAProxy; restarted, healthy $waited s later"
fleet_probe_at "$GATEWAY_PORT_2" "$GATEWAY_2" chats --count 4
fleet_probe peers --count 4

step user
for c in "$CONTAINER" "$GATEWAY"; do
  uid="$(docker exec "$c" id -u)"
  [[ "$uid" == 10001 ]] || die "container $c runs as uid $uid, not 10001"
  for file in keys.txt gateway.token; do
    docker exec "$c" sh -c ": >> /etc/sglang-fair/$file" 2>/dev/null && die "/etc/sglang-fair/$file is writable in $c"
  done
done
cpu_health="$(health_command "$CPU_IMAGE")"
[[ -n "$cpu_health" ]] || die "the CPU image has no HEALTHCHECK command"
docker exec "$CONTAINER" sh -c "$cpu_health" || die "the CPU image's HEALTHCHECK command failed in the container"
say "server A and the gateway: uid 10001, keys and token files read-only; the image's HEALTHCHECK command passes"

step health
pid="$(docker inspect -f '{{.State.Pid}}' "$CONTAINER")"
kill -STOP "$pid"
fleet_probe out --server sglang-fair-cpu-a
waited="$(wait_health "$CONTAINER" unhealthy 180)"
say "server A stopped: $waited s more to unhealthy"
kill -CONT "$pid"
waited="$(wait_health "$CONTAINER" healthy 180)"
say "server A resumed: $waited s to healthy"
fleet_probe back --server sglang-fair-cpu-a

step failover
fleet kill sglang-fair-cpu-b >"$WORK/kill-b.log" 2>&1 || die "compose kill failed: $(tail -3 "$WORK/kill-b.log")"
# Chats sent at once after the kill got 503 "broke off: Connection timeout" (2026-11-26): the gateway
# counts a connect timeout to the vanished container (its address cached for 10 s) as a started request,
# not as an unreachable server. Until it fails those over too, the chats go once its probe took B out.
fleet_probe out --server sglang-fair-cpu-b --wait 60
fleet_probe chats --count 4
fleet start sglang-fair-cpu-b >"$WORK/start-b.log" 2>&1 || die "compose start failed: $(tail -3 "$WORK/start-b.log")"
BOOTING="$B_CONTAINER"  # it boots during the gpu step; taken-back waits for it
say "server B started again"

step gpu
wait "$GPU_BUILD" || die "the gpu step's build (since the build step) failed: $(tail -15 "$WORK/gpu-build.log")"
GPU_BUILD=""
sed 's/^docker_check: /docker_check: gpu: /' "$WORK/gpu-build.log"
sglang_image="${SGLANG_FAIR_CHECK_SGLANG_IMAGE:-$LOCAL_SGLANG}"
if [[ -z "${SGLANG_FAIR_CHECK_SGLANG_IMAGE:-}" ]]; then
  out="$(docker run --rm --network none "$sglang_image" python3 -m pip install --no-index --no-deps six 2>&1 || true)"
  [[ "$out" == *externally-managed* ]] || die "the stand-in's Python is not marked externally managed (PEP 668): $out"
fi
gpu_run() { docker run --rm --network none "$@"; }
gpu_run --entrypoint python3 "$GPU_IMAGE" -m sglang_fair.selfcheck --require-extras bench | tail -2 | sed 's/^/docker_check: gpu: /'
out="$(gpu_run "$GPU_IMAGE" --help)" || die "the entry point (sglang-fair serve --help) failed: $out"
[[ "$out" == *--client-keys* ]] || die "the entry point (sglang-fair serve --help) does not list --client-keys"
info="$(gpu_run --entrypoint sh "$GPU_IMAGE" -c 'echo "$(id -u) $(python3 -V) $SGLANG_PLUGINS"')"
[[ "$info" == "10001 Python 3.12."*" sglang_fair" ]] || die "the GPU image runs as/with: $info"
say "gpu: entry point answers --help; uid, Python, plugins: $info"
# The compose gpu service's volumes: the named ones are created from the image's directories (owned by uid
# 10001); a host directory for HF_CACHE must be writable by uid 10001 (docs/guides/deploy.md).
docker volume create "${GPU_VOLUMES[0]}" >/dev/null && docker volume create "${GPU_VOLUMES[1]}" >/dev/null
gpu_run -v "${GPU_VOLUMES[0]}:/models:ro" -v "${GPU_VOLUMES[1]}:/home/sglang/.cache/huggingface" --entrypoint sh "$GPU_IMAGE" \
  -c 'touch "$HF_HOME/probe" && ! touch /models/probe 2>/dev/null' || die "named volumes: hf-cache not writable or /models writable"
mkdir -p "$WORK/hf-host" && chmod 0755 "$WORK/hf-host"
gpu_run -v "$WORK/hf-host:/home/sglang/.cache/huggingface" --entrypoint sh "$GPU_IMAGE" -c 'touch "$HF_HOME/probe" 2>/dev/null' \
  && die "a root-owned host HF_CACHE directory was writable by uid 10001"
chown 10001 "$WORK/hf-host"
gpu_run -v "$WORK/hf-host:/home/sglang/.cache/huggingface" --entrypoint sh "$GPU_IMAGE" -c 'touch "$HF_HOME/probe"' \
  || die "a host HF_CACHE directory owned by uid 10001 was not writable"
say "gpu: volumes: hf-cache writable, /models read-only; a host HF_CACHE needs uid 10001 (root-owned: refused)"
gpu_health="$(health_command "$GPU_IMAGE")"
docker run --rm --network "container:$CONTAINER" --entrypoint sh "$GPU_IMAGE" -c "$gpu_health" 2>"$WORK/gpu-health.log" \
  || die "the GPU image's HEALTHCHECK command failed against the running CPU server: $(tail -3 "$WORK/gpu-health.log")"
gpu_run --entrypoint sh "$GPU_IMAGE" -c "$gpu_health" 2>/dev/null && die "the GPU HEALTHCHECK command passed with no server"
say "gpu: its HEALTHCHECK command passes against the running CPU server, fails without one"

step taken-back
waited="$(wait_health "$BOOTING" healthy 600)"
say "server B healthy $waited s after the gpu step"
fleet_probe back --server sglang-fair-cpu-b

step fleet-down
down_and_check monitored

step try  # docs/guides/deploy.md, "Try it on CPU": compose.yaml alone, no keys file, clients named by a header
up_detached plain "$WORK/up-plain.log" || die "compose up failed: $(tail -5 "$WORK/up-plain.log")"
CONTAINER="$(plain ps -q sglang-fair-cpu)"
[[ -n "$CONTAINER" ]] || die "compose ps shows no sglang-fair-cpu container"
waited="$(wait_health "$CONTAINER" healthy 600)"  # an assignment: a failed wait ends the run
say "healthy after $waited s"
probe --client alice
down_and_check plain
finish_step
say "all checks passed"
