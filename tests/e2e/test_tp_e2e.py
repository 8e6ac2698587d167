"""A tensor-parallel server (``--tp-size 2`` on the CPU engine) whose non-leader rank dies.

Only the leader rank (attn-TP rank 0) has the plugin's worker link, so a dead non-leader is never
heard of directly. What takes the server down is SGLang: the leader's next collective over the dead
peer fails (gloo here; NCCL on a GPU may hang instead) and its scheduler sends SIGQUIT to the
launcher, and SGLang's ``SubprocessWatchdog`` does the same for any scheduler process that exits with
an error. The server goes down whole, so its heartbeats stop and a router or gateway takes it out
within its heartbeat timeout (docs/evidence/reliability.md, "Faults").
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import zmq

from sglang_fair.harness.server import free_port, running_server

pytestmark = pytest.mark.e2e


def test_a_killed_non_leader_rank_takes_its_server_down_whole_and_its_heartbeats_stop(
        tiny_model: Path, tmp_path: Path) -> None:
    import psutil

    feedback, procs = free_port(), []
    args = ("--tp-size", "2", "--max-total-tokens", "4000", "--feedback-port", str(feedback))
    with running_server(tiny_model, args, tmp_path / "tp.log", started=procs.append) as url:
        ended: dict[str, object] = {}

        def long_request() -> None:
            body = {"text": "a b c " * 20, "sampling_params": {"max_new_tokens": 3000, "ignore_eos": True}}
            req = urllib.request.Request(url + "/generate", data=json.dumps(body).encode(),
                                         headers={"content-type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=120) as resp:
                    ended["answer"] = resp.status
            except OSError as err:
                ended["answer"] = type(err).__name__
            ended["at"] = time.monotonic()

        context = zmq.Context()
        sub = context.socket(zmq.SUB)
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        sub.connect(f"tcp://127.0.0.1:{feedback}")
        try:
            assert sub.poll(10_000), "no heartbeat from the leader rank"
            thread = threading.Thread(target=long_request, daemon=True)
            thread.start()
            time.sleep(2.0)
            ranks = {p.cmdline()[0]: p for p in psutil.Process(procs[0].pid).children(recursive=True)
                     if "scheduler_TP" in " ".join(p.cmdline())}
            assert set(ranks) == {"sglang::scheduler_TP0", "sglang::scheduler_TP1"}, ranks
            os.kill(ranks["sglang::scheduler_TP1"].pid, signal.SIGKILL)
            killed = last_beat = time.monotonic()
            while procs[0].poll() is None and time.monotonic() - killed < 30:
                if sub.poll(200):
                    sub.recv()
                    last_beat = time.monotonic()
            gone = time.monotonic() - killed
            thread.join(30)
        finally:
            context.destroy(linger=0)
    print(f"\nheartbeats stopped {last_beat - killed:.1f} s after the kill; the request ended "
          f"{float(ended['at']) - killed:.1f} s after ({ended['answer']}); server gone within {gone:.1f} s")
    assert procs[0].poll() is not None, "the server outlived its non-leader rank by 30 s"
    assert last_beat - killed < 5.0  # the leader died with it (a heartbeat timeout catches it)
    assert ended["answer"] != 200 and float(ended["at"]) - killed < 20.0  # failed, did not hang
