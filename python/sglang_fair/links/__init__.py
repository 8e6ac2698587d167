"""The ZMQ links between the processes of a fleet, and their CurveZMQ keys; nothing here imports SGLang.

- :mod:`.curve`: the keys (``sglang-fair keys DIR``) and a socket made a CURVE server or client;
- :mod:`.sockets`: a publisher bound on a TCP port and a subscriber connected to one, the one way both
  links set them up;
- :mod:`.feedback_hub`: a server's feedback port (its schedulers' notices, published to gateways).

The gateway's side of both links (``gateway/feedback.py``, ``gateway/peers.py``) subscribes through
:mod:`.sockets`; the router process's own sockets are ``sglang_fair_router``'s.
"""
