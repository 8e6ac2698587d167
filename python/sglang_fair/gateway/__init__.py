"""``sglang-fair gateway``: one endpoint routing over the workers of several ``sglang-fair serve`` instances.

``config`` (flags), ``servers`` (discovery, the global worker table), ``prompt`` (token ids),
``routing`` (the policy's host), ``usage`` (output tokens for the finish), ``upstream`` (the HTTP
boundary to the servers), ``app`` (the HTTP boundary to the clients), ``cli``.
"""
