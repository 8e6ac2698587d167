"""Harnesses that drive live servers for the end-to-end tests, benchmarks and lab commands. Not part of
the serving path: nothing in ``sglang_plugin`` imports them.

* One process launcher, :class:`~sglang_fair.harness.proc.Proc` (``proc``): a command in its own session
  with a log file, ready when ``/health`` answers, stopped SIGTERM then SIGKILL. On it: a CPU SGLang
  server with the plugin (``server.running_server``), a gateway (``gateway.running_gateway``), the
  two-server, two-gateway cluster behind HAProxy (``cluster.start_cluster``, ``balancer``).
* One load model, :class:`~sglang_fair.harness.traffic.Traffic` (``traffic``): keyed clients, closed or
  open loop, ``/generate`` or chat streams, every request a ``Record``. ``closed_loop.run_load`` is its
  view for windowed closed-loop clients (censored latencies, per-client results); the fairness scenarios
  on one worker (``scenario``) and behind the router (``dp_scenario``) build on it, the chaos faults
  (``chaos``) and the cluster soak (``soak``) on ``Traffic`` directly. The user's load test is
  ``sglang_fair.loadtest``. A gateway's ceiling needs thousands of requests a second, past what threads
  send: ``async_load`` is the asyncio driver of ``lab gateway-speed`` (saturating or open loop, one
  request builder); ``proc_stats`` reads a process tree's CPU and memory from ``/proc``.
* ``memory`` samples the servers' memory; ``browser`` and ``page_check`` drive the fairness page.
"""
