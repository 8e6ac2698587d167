"""The experiment options as the scripts parse them, for the tests of this folder."""

from __future__ import annotations

import argparse

from sglang_fair.experiments.figures import add_options, parse_options


def options(*argv: str) -> argparse.Namespace:
    """``add_options`` then ``parse_options`` on ``argv``, as ``sglang-fair lab paper`` does."""
    parser = argparse.ArgumentParser()
    add_options(parser)
    args = parser.parse_args(list(argv))
    parse_options(parser, args)
    return args
