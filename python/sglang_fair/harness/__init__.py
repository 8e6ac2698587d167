"""Harnesses that drive a live server for the end-to-end tests and benchmarks: start and stop a CPU
SGLang server with the plugin (``server``), closed-loop HTTP clients (``closed_loop``; the user's load
test is ``sglang_fair.loadtest``), and the fairness scenarios on one worker (``scenario``) and behind
the router (``dp_scenario``). Not part of the serving path: nothing in ``sglang_plugin`` imports them."""
