"""The fairness page (``/fairness/ui``) of ``serve`` and of the gateway, the history it draws from, and
the gateway's ``/fairness`` and ``/metrics`` (docs/guides/visibility.md)."""
