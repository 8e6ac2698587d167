#!/usr/bin/env bash
# Install SGLang 0.5.23 for CPU-only serving into the current (or given) Python environment.
#   usage: scripts/install_sglang_cpu.sh [PYTHON]     (default: .venv/bin/python if present, else python3)
# Installs: CPU PyTorch 2.13.0, sglang 0.5.23 without its CUDA-only requirements, the ordinary dependencies
# pinned to versions verified together on a CPU machine, this package with the `sglang` extra's plugin
# entry point, and two small shims (see write_shims below). Idempotent; safe to re-run.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
py="${1:-}"
if [[ -z "$py" ]]; then
  if [[ -x "$here/.venv/bin/python" ]]; then py="$here/.venv/bin/python"; else py="python3"; fi
fi
pip=("$py" -m pip install --quiet)

# 1. CPU PyTorch first, so nothing below pulls a CUDA build (torch 2.13.0 resolves to the CPU wheel here;
#    on other machines add --index-url https://download.pytorch.org/whl/cpu).
"${pip[@]}" "torch==2.13.0" ${SGLANG_FAIR_TORCH_INDEX:+--index-url "$SGLANG_FAIR_TORCH_INDEX"}

# 2. SGLang itself without its metadata's dependencies: they hard-pin torch 2.14.1, sgl-kernel,
#    flashinfer and CUDA libraries that neither import nor serve on CPU.
"${pip[@]}" --no-deps "sglang==0.5.23"

# 3. The ordinary dependencies, pinned to a set that imported and served together on CPU
#    (checked with SGLang 0.5.23 on CPU: the plugin's e2e tests). --no-deps keeps pip from re-resolving torch.
"${pip[@]}" --no-deps \
  aiohappyeyeballs==2.7.1 aiohttp==3.14.5 aiosignal==1.4.0 annotated-doc==0.0.7 annotated-types==0.8.0 \
  anyio==4.16.0 apache-tvm-ffi==0.1.11 asttokens==3.0.2 attrs==26.1.0 blobfile==3.0.0 \
  certifi==2026.10.18 cffi==2.1.1 charset-normalizer==3.5.2 click==8.5.1 compressed-tensors==0.18.0 \
  dill==0.4.1 distro==1.9.0 einops==0.8.2 executing==2.3.0 fastapi==0.165.0 filelock==4.2.11 \
  frozenlist==1.8.0 fsspec==2026.9.0 gguf==0.19.0 h11==0.16.0 hf-xet==1.8.0 httpcore==1.0.9 \
  httpx==0.28.1 huggingface_hub==1.33.0 idna==3.20 interegular==0.3.3 ipython==9.18.1 \
  ipython_pygments_lexers==1.1.1 jedi==0.20.1 Jinja2==3.1.6 jiter==0.19.0 jsonschema==4.26.0 \
  jsonschema-specifications==2025.9.1 llguidance==1.9.1 loguru==0.7.3 lxml==6.1.3 \
  markdown-it-py==4.3.0 MarkupSafe==3.0.4 matplotlib-inline==0.2.2 mdurl==0.1.2 mpmath==1.3.0 \
  msgspec==0.22.0 multidict==7.2.1 networkx==3.6.1 numpy==2.4.6 openai==2.8.0 openai-harmony==0.0.4 \
  opentelemetry-api==1.45.2 orjson==3.13.0 packaging==26.3 parso==0.8.7 \
  partial-json-parser==0.2.1.1.post7 pexpect==4.9.0 pillow==13.0.0 prometheus_client==0.26.0 \
  prompt_toolkit==3.0.53 propcache==0.5.4 psutil==7.2.2 ptyprocess==0.7.0 pure_eval==0.2.4 \
  pybase64==1.5.1 pycparser==3.12 pycryptodomex==3.24.2 pydantic==2.14.3 pydantic_core==2.50.4 \
  Pygments==2.21.0 python-dateutil==4.0.0 python-multipart==0.0.34 PyYAML==6.0.3 pyzmq==27.3.0 \
  referencing==0.37.0 regex==2026.11.15 requests==2.34.2 rich==15.0.0 rpds-py==2026.9.1 \
  safetensors==0.8.0 scipy==1.17.1 sentencepiece==0.2.1 setproctitle==1.3.8 shellingham==1.5.4 \
  sniffio==1.3.1 soundfile==0.13.1 stack-data==0.6.3 starlette==1.10.0 sympy==1.14.0 \
  tiktoken==0.14.0 tokenizers==0.23.2 torchvision==0.28.0 tqdm==4.70.1 traitlets==5.16.1 \
  transformers==5.19.0 triton==3.9.0 typer==0.29.2 typing-inspection==0.4.5 typing_extensions==4.16.0 \
  tzdata==2026.6 urllib3==2.8.0 uvicorn==0.54.0 uvloop==0.23.0 watchfiles==1.3.0 wcwidth==0.9.4 \
  xgrammar==0.2.7 xxhash==4.1.0 yarl==1.25.1

# 4. This package, so the `sglang.srt.plugins` entry point is registered: editable from the checkout, or
#    the wheel named by SGLANG_FAIR_WHEEL (docker/Dockerfile.cpu).
if [[ -n "${SGLANG_FAIR_WHEEL:-}" ]]; then
  "${pip[@]}" --no-deps "$SGLANG_FAIR_WHEEL"
else
  PYTHONWARNINGS="ignore:Editable installation" "${pip[@]}" --no-deps -e "$here"  # setuptools' note
fi

# 5. Shims, installed as a .pth-loaded module in site-packages (run at interpreter start-up):
site="$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
cat > "$site/sglang_fair_cpu_shims.py" <<'PY'
"""CPU shims for SGLang 0.5.23, loaded at interpreter start-up by sglang_fair_cpu_shims.pth."""
import importlib.abc
import importlib.machinery
import sys


class _TorchvisionOpsFinder(importlib.abc.MetaPathFinder):
    """Shim 1: the registry's torchvision 0.28.0 is a CUDA build whose import fails under CPU torch with
    'operator torchvision::nms does not exist'; declaring the two op schemas before it loads lets it import."""

    def find_spec(self, name, path=None, target=None):
        if name == "torchvision":
            sys.meta_path.remove(self)
            import torch
            lib = torch.library.Library("torchvision", "FRAGMENT")
            for op in ("nms", "qnms"):
                try:
                    lib.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
                except RuntimeError:
                    pass
            globals().setdefault("_libs", []).append(lib)
        return None


class _SglKernelStubFinder(importlib.abc.MetaPathFinder):
    """Shim 2: with SGLANG_USE_CPU_ENGINE=1 SGLang imports sgl_kernel at import time, whose registry wheels
    need CUDA libraries; a stand-in whose every attribute raises is found instead, only when no real sgl_kernel
    is installed (this finder runs last); it was never called while serving on CPU."""

    def find_spec(self, name, path=None, target=None):
        if name == "sgl_kernel":  # top level only: `from sgl_kernel.x import y` still raises ImportError,
            return importlib.machinery.ModuleSpec(name, self)  # so SGLang's own fallbacks apply
        return None

    def create_module(self, spec):
        import types

        class _Stub(types.ModuleType):
            def __getattr__(self, attr):
                if attr.startswith("__"):
                    raise AttributeError(attr)

                def _missing(*args, **kwargs):
                    raise RuntimeError(f"sgl_kernel.{attr} is not available on CPU")

                return _missing

        return _Stub(spec.name)

    def exec_module(self, module):
        return None


sys.meta_path.insert(0, _TorchvisionOpsFinder())
sys.meta_path.append(_SglKernelStubFinder())
PY
echo "import sglang_fair_cpu_shims" > "$site/sglang_fair_cpu_shims.pth"

SGLANG_USE_CPU_ENGINE=1 "$py" -c 'import torch, torchvision, sglang; from sglang.srt.managers import schedule_policy; print("sglang", sglang.__version__, "torch", torch.__version__, "ok")'
