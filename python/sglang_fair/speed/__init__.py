"""Speed and memory benchmarks that print figures (targets are measured here, not in timed tests):
``sglang-fair speed-policies`` (the policy core), ``speed-router`` (the router process, through real
ZMQ sockets), ``speed-sim`` (the simulator). ``sglang-fair bench`` is the load test of a server."""
