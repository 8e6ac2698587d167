"""The fairness page under a flood, photographed by headless Chromium (the README's picture).

    sglang-fair lab page-shot --model DIR [--seconds 120] [--out docs/img/fairness_page.png]

Starts ``sglang-fair serve`` on CPU with two data-parallel workers behind the fair router (the defaults:
``dlpm_light`` on each worker, ``fair_cache_aware`` routing), client keys and ``--client-max-inflight 12``,
then sends the flood of the plugin's benchmark and the demo: ``flood`` keeps 16 requests over one shared
300-word prefix in flight (4 more than its bound allows, so some get 429 and wait their Retry-After),
two light clients send one streamed chat at a time, and ``batch`` one unique prompt at a time. After
``--seconds`` of it, the page at ``/fairness/ui`` is loaded with the admin's key, drawn, and saved; the
script fails if the page logged an error or fetched anything from elsewhere. Needs SGLang
(scripts/install_sglang_cpu.sh) and chromium (scripts/install_test_tools.sh).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from sglang_fair.harness.page_check import look
from sglang_fair.harness.server import exit_on_sigterm, running_server
from sglang_fair.harness.traffic import Spec, Traffic

CLIENTS = {"flood": "k-flood", "light-a": "k-light-a", "light-b": "k-light-b", "batch": "k-batch",
           "ops": "k-ops"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True,
                        help="model directory (scripts/make_tiny_model.py)")
    parser.add_argument("--seconds", type=float, default=120.0, help="seconds of flood before the picture")
    parser.add_argument("--out", type=Path, default=Path("docs/img/fairness_page.png"))
    args = parser.parse_args()
    if not args.model.is_dir():
        parser.error(f"--model {args.model}: not a directory")
    exit_on_sigterm()
    specs = [Spec("flood", CLIENTS["flood"], False, 16, prefix_words=300, words=20),
             Spec("light-a", CLIENTS["light-a"], True, 1), Spec("light-b", CLIENTS["light-b"], True, 1),
             Spec("batch", CLIENTS["batch"], False, 1, words=120)]
    with tempfile.TemporaryDirectory(prefix="page-shot-") as name:
        tmp = Path(name)
        (tmp / "keys").write_text("".join(f"{key} {client}\n" for client, key in CLIENTS.items()))
        server_args = ["--client-keys", str(tmp / "keys"), "--fairness-admins", "ops",
                       "--client-max-inflight", "12", "--max-running-requests", "8",
                       "--max-total-tokens", "20000"]
        with running_server(args.model, server_args, tmp / "serve.log", dp_size=2) as url:
            traffic = Traffic(url, specs, deadline=120.0).start()
            time.sleep(args.seconds)
            visit = look(url, CLIENTS["ops"], renders=1)
            traffic.stop(wait=30.0)
    records = traffic.snapshot()
    outcomes = {o: sum(1 for r in records if r.outcome == o) for o in sorted({r.outcome for r in records})}
    foreign = [u for u in visit.fetched if not u.startswith(url)]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(visit.screenshot)
    print(f"{args.out}: {len(visit.screenshot)} bytes; requests {outcomes}; drawn clients "
          f"{sorted(visit.value['areas'])}; errors {visit.errors}; fetched elsewhere {foreign}")
    return 1 if visit.errors or foreign else 0


if __name__ == "__main__":
    sys.exit(main())
