# Stand-in for lmsysorg/sglang:v0.5.23 (docker/Dockerfile's base) on machines that reach no image registry,
# made by scripts/docker_check.sh. What docker/Dockerfile relies on in SGLang's image, and nothing else:
# - the same Python as SGLang's image (3.12, its python3), copied by the script into python/ of the build
#   context, marked externally managed (PEP 668) as a distribution's system Python is;
# - SGLang 0.5.23's own package (the version assertion reads its metadata), without torch or CUDA, so
#   nothing here can serve a model;
# - the packages sglang-fair needs from SGLang's image, at the versions of scripts/install_sglang_cpu.sh.
ARG BASE=sglang-fair-local/debian:bookworm
FROM ${BASE}
# The shared libraries the interpreter's extension modules link to.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libssl3 libffi8 libsqlite3-0 libbz2-1.0 liblzma5 \
      libreadline8 libncursesw6 libuuid1 zlib1g libexpat1 libnsl2 \
 && rm -rf /var/lib/apt/lists/*
COPY python/ /opt/python/
# On PATH as a system Python's script directory is: docker/Dockerfile's ENTRYPOINT is pip's `sglang-fair` script.
ENV PATH=/opt/python/bin:${PATH}
RUN echo /opt/python/lib > /etc/ld.so.conf.d/opt-python.conf && ldconfig \
 && python3 -m ensurepip \
 && python3 -m pip install --no-cache-dir --no-deps sglang==0.5.23 \
 && python3 -m pip install --no-cache-dir \
      pyzmq==27.3.0 msgspec==0.22.0 prometheus_client==0.26.0 aiohttp==3.14.5 \
 && printf '[externally-managed]\nError=system Python of the stand-in image\n' \
      > "$(python3 -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')/EXTERNALLY-MANAGED" \
 && python3 -c "import importlib.metadata as m; print('stand-in: Python', __import__('sys').version.split()[0], 'sglang', m.version('sglang'))"
CMD ["python3"]
