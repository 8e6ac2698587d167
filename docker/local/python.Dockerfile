# Stand-in for python:3.11.7-slim-bookworm (docker/Dockerfile.cpu's base) on machines that reach no image
# registry: Debian bookworm's own Python 3.11 as `python`, with pip and venv, on the local base that
# scripts/docker_check.sh makes with debootstrap. Not for users; the official tag stays the default.
ARG BASE=sglang-fair-local/debian:bookworm
FROM ${BASE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv python3-pip python-is-python3 \
 && rm -rf /var/lib/apt/lists/*
CMD ["python"]
