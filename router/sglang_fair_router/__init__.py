"""The global fair router: a ZMQ service around the core routing policies (D²LPM and baselines).

Imports neither torch nor SGLang: SGLang's side only adapts its messages to the ones here
(``frontend_msgs`` for the tokenizer-manager boundary, ``worker_msgs`` for the worker boundary).
"""
