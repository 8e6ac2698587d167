# shellcheck shell=bash disable=SC2015,SC2034,SC2153  # sourced by docker_check.sh, which sets ROOT and reads COMPOSE
# Functions for scripts/docker_check.sh (sourced, not run): the engine, the base images, compose, waiting.
# Every function that can fail calls `die` with what it saw; docker_check.sh names the step.

die() { echo "docker_check: $*" >&2; exit 1; }
say() { echo "docker_check: $*"; }
low() { nice -n "$NICE" ionice -c3 "$@"; }  # heavy work at low priority (SGLANG_FAIR_CHECK_NICE)

# Debian packages by name, without their recommendations (apparmor, needrestart, ...); output in $WORK/apt.log.
apt_install() {
  { apt-get update -q && DEBIAN_FRONTEND=noninteractive low apt-get install -y -q --no-install-recommends "$@"; } \
    >>"$WORK/apt.log" 2>&1 || die "apt-get install $* failed: $(tail -5 "$WORK/apt.log")"
}

# A free TCP port on 127.0.0.1: $1 if nothing listens on it, else any.
free_port() {
  python3 - "${1:-0}" <<'PY'
import socket, sys
for port in (int(sys.argv[1]), 0):
    try:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as http.server binds: TIME_WAIT is no use
            s.bind(("127.0.0.1", port))
            print(s.getsockname()[1])
            break
    except OSError:
        continue
PY
}

# N distinct free TCP ports on 127.0.0.1, one a line (all bound at once, so none is given twice).
free_ports() {
  python3 - "$1" <<'PY'
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print("\n".join(str(s.getsockname()[1]) for s in socks))
PY
}

# --- engine -------------------------------------------------------------------------------------------
# The running engine if `docker info` answers; else Debian's docker.io (installed if missing) started here
# with no iptables rules, no IP forwarding and no default bridge, so the host's network is left as it was:
# containers reach the host only through published ports (docker-proxy on 127.0.0.1), builds use the
# host's network (--network host / build.network: host).
ensure_engine() {
  if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
    say "engine: the running one ($(docker version -f '{{.Server.Version}}'), storage $(docker info -f '{{.Driver}}'))"
    if [[ -f "$ENGINE_OWNED" ]]; then  # started by a --prepare run: this run stops it as its own
      STARTED_ENGINE=1 OPENED_BRIDGES="$(cat "$ENGINE_OWNED")"
      rm -f "$ENGINE_OWNED"
      say "engine: started by a --prepare run; stopped at the end of this one"
    fi
    return
  fi
  [[ "$(id -u)" == 0 ]] || die "no Docker engine answers and this is not root: start one, or run this as root"
  if ! command -v dockerd >/dev/null; then
    command -v apt-get >/dev/null || die "no Docker engine and no apt-get to install Debian's docker.io"
    say "installing Debian's docker.io"
    apt_install docker.io
  fi
  local args=(--iptables=false --ip-forward=false --bridge=none --pidfile "$ENGINE_PID")
  [[ -n "$STORAGE_DRIVER" ]] && args+=(--storage-driver="$STORAGE_DRIVER")
  low dockerd "${args[@]}" >"$WORK/dockerd.log" 2>&1 &
  STARTED_ENGINE=1
  local i
  for i in $(seq 60); do
    docker info >/dev/null 2>&1 && break
    kill -0 $! 2>/dev/null || die "dockerd exited at start: $(tail -5 "$WORK/dockerd.log")"
    sleep 1
  done
  docker info >/dev/null 2>&1 || die "dockerd started but its socket did not answer in 60 s: $(tail -5 "$WORK/dockerd.log")"
  say "engine: started dockerd $(docker version -f '{{.Server.Version}}') (storage $(docker info -f '{{.Driver}}'), ${args[*]:0:3}; log $WORK/dockerd.log)"
  open_bridges
}

# Without its iptables rules dockerd leaves the FORWARD chain as it found it; where bridged frames pass
# through it (br_netfilter: bridge-nf-call-iptables = 1) and its policy drops (set by an earlier dockerd, e.g.
# the one Debian's package starts), containers on one compose network cannot reach each other. One rule lets
# traffic within a Docker bridge (br-*) through, and stop_engine removes it.
BRIDGE_RULE=(FORWARD -i br-+ -o br-+ -m comment --comment sglang-fair-docker-check -j ACCEPT)
open_bridges() {
  [[ "$(cat /proc/sys/net/bridge/bridge-nf-call-iptables 2>/dev/null)" == 1 ]] || return 0
  command -v iptables >/dev/null || return 0
  iptables -S FORWARD 2>/dev/null | grep -qx -- "-P FORWARD ACCEPT" && return 0
  iptables -I "${BRIDGE_RULE[@]}" || die "the FORWARD chain drops bridged traffic and a rule to let it through failed"
  OPENED_BRIDGES=1
  say "engine: the FORWARD chain drops bridged traffic (policy $(iptables -S FORWARD | head -1 | cut -d' ' -f3)); let traffic within Docker bridges through"
}

stop_engine() {
  [[ "$OPENED_BRIDGES" == 1 ]] && iptables -D "${BRIDGE_RULE[@]}" 2>/dev/null && OPENED_BRIDGES=0
  [[ "$STARTED_ENGINE" == 1 && -f "$ENGINE_PID" ]] || return 0
  local pid i
  pid="$(cat "$ENGINE_PID")"
  kill "$pid" 2>/dev/null || return 0
  for i in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  kill -0 "$pid" 2>/dev/null && echo "docker_check: dockerd $pid still running after 60 s" >&2
  say "engine: dockerd stopped"
}

# The compose command users run: the v2 plugin if the docker CLI has it, else v1 (Debian's docker-compose,
# installed if missing). COMPOSE is an array; COMPOSE_NAME says which ran.
ensure_compose() {
  if docker compose version >/dev/null 2>&1; then
    COMPOSE=(docker compose); COMPOSE_NAME="docker compose $(docker compose version --short) (v2)"
    return
  fi
  if ! command -v docker-compose >/dev/null; then
    [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null || die "neither docker compose (v2) nor docker-compose (v1)"
    say "installing Debian's docker-compose (v1; Debian packages no Compose v2 plugin)"
    apt_install docker-compose
  fi
  COMPOSE=(docker-compose); COMPOSE_NAME="docker-compose $(docker-compose version --short) (v1)"
}

# --- bases --------------------------------------------------------------------------------------------
have_image() { docker image inspect "$1" >/dev/null 2>&1; }

# The official image if present or pullable (PULL_TIMEOUT s); prints nothing and fails otherwise.
official_image() {
  have_image "$1" && return 0
  timeout "$PULL_TIMEOUT" docker pull -q "$1" >/dev/null 2>&1
}

# sglang-fair-local/debian:bookworm from Debian's packages (debootstrap), trusting the host's extra
# certificate authorities (without them pip and apt over TLS fail inside builds behind an inspecting proxy).
make_debian_base() {
  have_image "$LOCAL_DEBIAN" && { say "base: $LOCAL_DEBIAN present"; return; }
  command -v debootstrap >/dev/null || apt_install debootstrap debian-archive-keyring
  local root="$WORK/rootfs"
  low debootstrap --variant=minbase --include=ca-certificates bookworm "$root" "$DEBIAN_MIRROR" >"$WORK/debootstrap.log" 2>&1 \
    || die "debootstrap failed: $(tail -3 "$WORK/debootstrap.log")"
  cp -r /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/" 2>/dev/null || true
  chroot "$root" update-ca-certificates >/dev/null 2>&1 || die "update-ca-certificates failed in the debootstrap tree"
  printf 'deb %s bookworm main\ndeb %s bookworm-updates main\ndeb %s-security bookworm-security main\n' \
    "$DEBIAN_MIRROR" "$DEBIAN_MIRROR" "$DEBIAN_MIRROR" >"$root/etc/apt/sources.list"
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" -c . | docker import -c 'CMD ["bash"]' -c 'ENV LANG=C.UTF-8' \
    -c 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' -c 'ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' \
    - "$LOCAL_DEBIAN" >/dev/null || die "docker import of the debootstrap tree failed"
  rm -rf "$root"
  say "base: $LOCAL_DEBIAN made with debootstrap ($(find /usr/local/share/ca-certificates -name "*.crt" 2>/dev/null | wc -l) extra CA certificate(s))"
}

# Build a stand-in from docker/local/NAME.Dockerfile on the local Debian base: build_local NAME TAG CONTEXT
build_local() {
  low docker build --network host -f "$ROOT/docker/local/$1.Dockerfile" --build-arg BASE="$LOCAL_DEBIAN" \
    -t "$2" "$3" >"$WORK/build-$1.log" 2>&1 || die "building $2 failed: $(tail -5 "$WORK/build-$1.log")"
  say "base: $2 built from docker/local/$1.Dockerfile"
}

# The Python of SGLang's image (3.12) for the SGLang stand-in, copied from a self-contained install on the
# host (pyenv's, or SGLANG_FAIR_CHECK_PYTHON312=PREFIX), without its tests and site-packages.
copy_python312() {
  local prefix="${PYTHON312_PREFIX:-}" found
  if [[ -z "$prefix" ]]; then  # python3.12 on PATH (a pyenv shim may name it and still not run it), else pyenv's
    prefix="$(python3.12 -c 'import sys; print(sys.base_prefix)' 2>/dev/null)" || prefix=""
    for found in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*; do [[ -z "$prefix" && -d "$found" ]] && prefix="$found"; done
  fi
  [[ -n "$prefix" && "$prefix" != /usr && -x "$prefix/bin/python3.12" && -f "$prefix/lib/python3.12/os.py" ]] \
    || die "no self-contained Python 3.12 on this machine (SGLang's image has 3.12): set SGLANG_FAIR_CHECK_PYTHON312=PREFIX"
  mkdir -p "$1/python"
  tar -C "$prefix" -c --exclude=./lib/python3.12/test --exclude=./lib/python3.12/site-packages \
    --exclude='*.a' --exclude=__pycache__ . | tar -C "$1/python" -x
  mkdir -p "$1/python/lib/python3.12/site-packages"
}

# The folder with torch 2.13.0's CPU wheel for Python 3.11: SGLANG_FAIR_CHECK_WHEELS, else one of pip's own
# find-links folders (environment or configuration); prints nothing if there is none.
find_torch_wheels() {
  local dir
  for dir in ${SGLANG_FAIR_CHECK_WHEELS:-} ${PIP_FIND_LINKS:-} $(python3 -m pip config get global.find-links 2>/dev/null); do
    if [[ -d "$dir" ]] && compgen -G "$dir/torch-2.13.0+cpu-cp311-*.whl" >/dev/null; then echo "$dir"; return; fi
  done
}

# A folder of wheels pip may take torch from (the CPU build), served on 127.0.0.1 for the build: sets
# FIND_LINKS (its URL) and WHEEL_SERVER (the pid cleanup stops; not called in $(...), which would lose it).
# The same port each run where it is free, so that the URL, a build argument, keeps the build cache valid.
serve_wheels() {
  local dir="$1" port
  port="$(free_port 38461)"
  (cd "$dir" && exec python3 -m http.server --bind 127.0.0.1 "$port") >"$WORK/wheels.log" 2>&1 &
  WHEEL_SERVER=$!
  local i
  for i in $(seq 20); do curl -sf -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.5; done
  FIND_LINKS="http://127.0.0.1:$port/"
}

# --- waiting ------------------------------------------------------------------------------------------
# wait_health CONTAINER WANT LIMIT_S: until its health status is WANT; fails at once if it restarted or exited.
wait_health() {
  local c="$1" want="$2" limit="$3" start state status restarts health
  start="$(date +%s)"
  while true; do
    state="$(docker inspect -f '{{.State.Status}} {{.RestartCount}} {{if .State.Health}}{{.State.Health.Status}}{{end}}' "$c")" \
      || die "container $c is gone"
    read -r status restarts health <<<"$state"
    [[ "$health" == "$want" ]] && { echo $(( $(date +%s) - start )); return 0; }
    if [[ "$status" != running || "$restarts" != 0 ]]; then
      die "container $c is $status after $restarts restart(s), health '$health'; its log ends:
$(docker logs --tail 25 "$c" 2>&1)"
    fi
    (( $(date +%s) - start > limit )) && die "container $c not $want after ${limit} s (health '$health'); its log ends:
$(docker logs --tail 25 "$c" 2>&1)"
    sleep 2
  done
}

# The image's HEALTHCHECK as a shell command (CMD-SHELL form or CMD argv joined).
health_command() {
  docker image inspect -f '{{json .Config.Healthcheck.Test}}' "$1" | python3 -c '
import json, shlex, sys
test = json.load(sys.stdin) or []
print(test[1] if test[:1] == ["CMD-SHELL"] else shlex.join(test[1:]) if test[:1] == ["CMD"] else "")'
}
