"""The lab: every benchmark, comparison, simulator study, probe and report tool of the project, one name each.

``sglang-fair lab NAME [ARGS...]`` runs one (:mod:`sglang_fair.lab.registry` lists them); ``sglang-fair lab``
prints the list and ``sglang-fair lab NAME --help`` the lab's own flags. ``python -m sglang_fair.lab`` is
the same entry with the standard library only (up to the lab's own imports): the Docker check runs its
probes so with any ``python3`` on the host. A lab is a module with ``main()`` that parses ``sys.argv``;
the labs of the simulator live in :mod:`sglang_fair.experiments` and are registered here by name.
"""
