"""The HTTP edge that ``sglang-fair serve`` and ``sglang-fair gateway`` share: who the client is, what
it may do, and how a refusal reads. Plain ASGI and the standard library: nothing here imports SGLang
(``tests/test_import_rules.py`` holds that), so the gateway runs without it.

- :mod:`.asgi`: the ASGI types, a request body read once, headers as a mapping;
- :mod:`.errors`: the OpenAI-style error body and JSON answers;
- :mod:`.keys`: the API-key file; :mod:`.identity`: the client of a request (401);
- :mod:`.admins`: the clients whose keys read every client (403 for others at ``/metrics``);
- :mod:`.inflight`: a bound on one client's requests in flight (429);
- :mod:`.trust`: the gateway token and who may pin a data-parallel rank (403);
- :mod:`.model_names`: 404 for a model the server does not serve;
- :mod:`.limits`: the body-size limit (413) and ``Retry-After`` on every 429;
- :mod:`.config`: :class:`~.config.EdgeConfig`, the flags of all of it, declared once.
"""
