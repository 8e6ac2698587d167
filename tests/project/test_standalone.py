"""The repository alone runs everything: its data ships with it, nothing refers outside it.

The copy test runs the demo's simulation and one workload of each kind from a copy of the tracked
files in an empty folder, with the copy's package first on the path (checked), so a default that
points outside the repository fails it.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sglang_fair.core.errors import ConfigError
from sglang_fair.workloads import WorkloadConfig, make_workload
from sglang_fair.workloads.config import DEFAULT_DATA_DIR

ROOT = Path(__file__).resolve().parents[2]
OUTSIDE = re.compile(r"\.\./shared|/work/shared|shared/(data|papers|tools|sglang|DESIGN)")
KINDS = (  # one workload of each kind, every data set the workloads read
    "WorkloadConfig(workload='tot', scenario='s1', duration=5, rate=0.5)",
    "WorkloadConfig(workload='judge', duration=5, rate=0.5)",
    "WorkloadConfig(workload='qa', duration=5, rate=0.5, documents=12)",
    "WorkloadConfig(workload='multiturn', duration=5, rate=0.5)",
    "WorkloadConfig(workload='multiturn', source='mooncake', duration=5)",
    "WorkloadConfig(workload='multiturn', source='vtc', duration=5)",
    "WorkloadConfig(workload='arena', clients=4, duration=20)",
    "WorkloadConfig(workload='mix', clients=4, duration=5, rate=0.5)",
    "WorkloadConfig(workload='trace', duration=5,"
    " trace_file=str(DATA / 'azure_llm_2023/AzureLLMInferenceTrace_code.csv'))",
)
COPY_RUN = """
import sys
from pathlib import Path
import sglang_fair
from sglang_fair.cli import main
from sglang_fair.workloads import WorkloadConfig, make_workload
from sglang_fair.workloads.config import DEFAULT_DATA_DIR
DATA = Path(DEFAULT_DATA_DIR)
print("package", sglang_fair.__file__)
print("data", DATA)
for cfg in [{kinds}]:
    assert not cfg.synthetic_data
    print(cfg.workload, cfg.source, len(make_workload(cfg, dp=2)))
sys.exit(main([{demo}]))
"""


def _tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [p for p in out.decode().split("\0") if p and (ROOT / p).is_file()]


def _demo_args() -> list[str]:
    """The flags scripts/demo.sh passes to ``sglang-fair sim``, with a shorter run."""
    text = (ROOT / "scripts" / "demo.sh").read_text()
    command = text.split("sglang-fair sim", 1)[1].split('"$@"', 1)[0].replace("\\\n", " ")
    args = [a.strip('"') for a in command.split()]
    args[args.index("--duration") + 1] = "8"
    return ["sim", *args, "--no-progress"]


def test_no_tracked_file_refers_outside_the_repository() -> None:
    hits = []
    for name in _tracked():
        if name == "tests/project/test_standalone.py":  # its own pattern
            continue
        try:
            text = (ROOT / name).read_text()
        except UnicodeDecodeError:
            continue
        hits += [f"{name}:{n}" for n, line in enumerate(text.splitlines(), 1) if OUTSIDE.search(line)]
    assert hits == []


def test_the_shipped_data_matches_its_manifest() -> None:
    data = Path(DEFAULT_DATA_DIR)
    manifest = (data / "MANIFEST.md").read_text()
    files = sorted(p for p in data.rglob("*") if p.is_file() and p.name != "MANIFEST.md")
    assert len(files) == 8
    for path in files:
        row = next(line for line in manifest.splitlines() if f"`{path.relative_to(data)}`" in line)
        blob = path.read_bytes()
        assert hashlib.sha256(blob).hexdigest() in row and f"{len(blob):,}" in row


@pytest.mark.parametrize(("workload", "named"), [
    ("tot", "gsm8k/test.jsonl"), ("qa", "loogle/longdep_qa.jsonl"), ("multiturn", "tokenizers/gpt2.tiktoken"),
    ("arena", "vtc_lmsys/real_trace.csv")])
def test_a_missing_data_set_is_an_error_that_names_it(tmp_path: Path, workload: str, named: str) -> None:
    (tmp_path / "tokenizers").mkdir()
    if workload != "multiturn":
        shutil.copy(Path(DEFAULT_DATA_DIR, "tokenizers", "gpt2.tiktoken"), tmp_path / "tokenizers")
    cfg = WorkloadConfig(workload=workload, clients=4, duration=5, rate=0.5, data_dir=str(tmp_path))
    with pytest.raises(ConfigError, match=re.escape(named)):
        make_workload(cfg)


def test_the_demo_and_every_workload_run_from_a_copy_with_nothing_beside_it(tmp_path: Path) -> None:
    copy = tmp_path / "alone" / "sglang-fair"
    for name in _tracked():
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, copy / name)
    assert sorted(p.name for p in (tmp_path / "alone").iterdir()) == ["sglang-fair"]
    script = COPY_RUN.format(kinds=", ".join(KINDS), demo=", ".join(map(repr, _demo_args())))
    script = script.replace("--plot', 'out/demo.png", f"--plot', '{tmp_path / 'demo.png'}")
    env = dict(os.environ, PYTHONPATH=f"{copy / 'python'}{os.pathsep}{copy / 'router'}")
    done = subprocess.run([sys.executable, "-c", script], cwd=copy, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"package {copy / 'python' / 'sglang_fair' / '__init__.py'}"
    assert lines[1] == f"data {copy / 'python' / 'sglang_fair' / 'data'}"
    assert all(int(line.split()[-1]) > 0 for line in lines[2:2 + len(KINDS)])
    assert "Starved:" in done.stdout and "Fairness costs:" in done.stdout
    assert (tmp_path / "demo.png").stat().st_size > 10_000
