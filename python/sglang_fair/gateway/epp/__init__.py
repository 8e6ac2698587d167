"""The endpoint picker's protocol: Envoy's ext_proc as the Gateway API Inference Extension uses it.

``config`` (the ``--ext-proc-...`` flags; no gRPC needed), ``messages`` (the protocol's messages,
built at run time from ``ext_proc.binpb``, the descriptor set of the vendored protos in ``protos/``),
``protocol`` (what the Endpoint Picker Protocol says: the destination header and metadata, immediate
responses, streamed bodies). The picker itself is ``gateway/ext_proc.py``; it needs the ``epp`` extra.
"""
