"""D²LPM with a herding guard: [1] Alg. 2's deficits, a minimum match and a load guard.

Algorithm 2 (``d2lpm``) sends a request to the least-queued worker holding its *longest* match,
however short. With a short template shared by every client, the first worker that received it is
the longest match of every new program, and with a large Q^w all clients stick to it
(docs/evidence/results_details.md, "D²LPM without herding"). This variant keeps everything of Alg. 2
that the fairness argument uses (the per-(client, worker) counters, their refill only when all are
spent, the charges at dispatch and finish, and the rule that only a worker where the client's
counter is positive, G_avail, may be chosen) and changes only *which* worker of G_avail gets r:

- **minimum match**: the longest match counts as holding r's prefix only if it covers at least
  ``guard_min_match`` tokens (or the whole prompt, if shorter); otherwise G is empty and r goes to
  the least-queued worker of G_avail, as Alg. 2 does when no holder has credit;
- **load guard** (SGLang's cache-aware balance rule, its thresholds ``balance_abs_threshold`` and
  ``balance_rel_threshold``): if the chosen holder's queue exceeds the least-queued worker of
  G_avail by more than the absolute threshold *and* by more than the relative factor, r goes to
  that least-queued worker instead.

The per-worker bound of [1] Thm 4.1 and so Thm 5.1 under "backlogged on every worker" do not
depend on the router. The router's own part (the proof's step that a backlogged client is
backlogged everywhere, whose failure Thm A.5 shows for Q^w = infinity) rests on the counters alone:
between its R-th and (R+1)-th refill a client is charged at least (R-1) Q^w and less than
R Q^w + one request's input cost at every worker at dispatch time, whichever worker of G_avail each
request went to. The variant keeps that invariant unchanged; it neither adds to nor removes from
Alg. 2's guarantee.
"""

from __future__ import annotations

from sglang_fair.core.global_tree import token_count
from sglang_fair.routing.base import RouteRequest, least_loaded
from sglang_fair.routing.d2lpm import D2LPM


class D2LPMGuarded(D2LPM):
    name = "d2lpm_guarded"

    last_decision = ""  # "holder", "short", "no-credit" or "guard", for tests and views

    def pick(self, req: RouteRequest, available: list[int]) -> int:
        cfg, queue = self.config, self.queue
        lightest = least_loaded(available, queue)
        matched, holders = self.tree.longest_match(req.tokens)
        if matched < min(cfg.guard_min_match, token_count(req.tokens)) or not holders:
            self.last_decision = "short"
            return lightest
        candidates = [w for w in available if w in holders]
        if not candidates:
            self.last_decision = "no-credit"
            return lightest
        best = least_loaded(candidates, queue)
        high, low = queue[best], queue[lightest]
        if high - low > cfg.balance_abs_threshold and high > cfg.balance_rel_threshold * low:
            self.last_decision = "guard"
            return lightest
        self.last_decision = "holder"
        return best
