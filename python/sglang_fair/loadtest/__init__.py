"""``sglang-fair bench``: the simulator's workloads sent to a real OpenAI-compatible server over HTTP.

Programs keep their dependencies (a call is sent when the calls it waits for have answered, with
their real generated text in its prompt); every call streams, so TTFT, TPOT and end-to-end latency
are measured per request. The run is recorded in the simulator's :class:`~sglang_fair.metrics.RunResult`
and summarized by the same code, so a real and a simulated run have the same JSON keys and plots.
"""
