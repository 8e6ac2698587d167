"""The tenant file (``edge/tenants.py``): one TOML file of keys, weights and budgets that ``serve`` and the
gateway read through the same ``--client-keys``; a key file is a tenant file with defaults; errors name
the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from sglang_fair.cli import build_parser
from sglang_fair.core.errors import ConfigError
from sglang_fair.edge.budgets import Budget
from sglang_fair.edge.keys import load_key_file
from sglang_fair.gateway.config import gateway_config
from sglang_fair.sglang_plugin.config import build_config

TENANTS = """\
# three tenants
[tenants.premium]
keys = ["sk-p1", "sk-p2"]
weight = 4
band = "interactive"
requests_per_minute = 600
tokens_per_minute = 200_000

[tenants.regular]
keys = ["sk-r"]
allow_request_priority = true

[tenants.free]
keys = ["sk-f"]
weight = 0.5
band = "batch"
tokens_per_minute = 20_000
"""


def write(tmp_path: Path, text: str, name: str = "tenants.toml") -> str:
    (tmp_path / name).write_text(text)
    return str(tmp_path / name)


def test_a_tenant_file_gives_keys_weights_and_budgets(tmp_path: Path) -> None:
    table = load_key_file(write(tmp_path, TENANTS))
    assert table.clients == {"sk-p1": "premium", "sk-p2": "premium", "sk-r": "regular", "sk-f": "free"}
    assert table.weights == {"premium": 4.0, "free": 0.5}
    assert table.budgets == {"premium": Budget(600, 200_000), "free": Budget(0, 20_000)}
    assert table.bands == {"premium": 0, "free": 2}
    assert table.request_priority == {"regular"}


def test_a_key_file_is_a_tenant_file_with_defaults(tmp_path: Path) -> None:
    table = load_key_file(write(tmp_path, "k-a alice 2\nk-b bob\n", "keys.txt"))
    assert table.clients == {"k-a": "alice", "k-b": "bob"} and table.weights == {"alice": 2.0}
    assert table.budgets == {}


def test_serve_and_the_gateway_read_the_same_tenants(tmp_path: Path) -> None:
    flags = ["--client-keys", write(tmp_path, TENANTS)]
    served = build_config(vars(build_parser().parse_args(["serve", *flags])))
    gateway = gateway_config(build_parser().parse_args(["gateway", "--worker-urls", "http://s:1", *flags]))
    assert served.edge == gateway.edge and served.edge.key_table.budgets["premium"].requests_per_minute == 600
    assert served.cost().client_weights == gateway.cost().client_weights == {"premium": 4.0, "free": 0.5}
    assert served.for_policy("dlpm_light").client_bands == {"premium": 0, "free": 2}  # the schedulers'


def test_a_band_in_the_file_and_another_in_the_flag_is_refused(tmp_path: Path) -> None:
    flags = ["serve", "--client-keys", write(tmp_path, TENANTS), "--fair-client-bands", "free=interactive"]
    with pytest.raises(ConfigError, match="band 0 in --fair-client-bands conflicts with band 2"):
        build_config(vars(build_parser().parse_args(flags)))


@pytest.mark.parametrize(("text", "message"), [
    ("[tenants.a]\nkeys = [\"k\"]\nweigth = 2\n", "tenants.toml:1: tenant 'a': unknown field(s) weigth"),
    ("[tenants.a]\nkeys = [\"k\"]\n\n[tenants.b]\nkeys = [\"k\"]\n", "tenants.toml:4: tenant 'b': a key is"),
    ("[tenants.a]\nkeys = []\n", "tenants.toml:1: tenant 'a': keys must be a non-empty list"),
    ("[tenants.a]\nkeys = [\"k\"]\nweight = 0\n", "weight must be a number > 0"),
    ("[tenants.a]\nkeys = [\"k\"]\nband = \"urgent\"\n", "band must be one of interactive, standard, batch"),
    ("[tenants.a]\nkeys = [\"k\"]\ntokens_per_minute = -1\n", "tokens_per_minute must be a whole number"),
    ("[tenants.a]\nkeys = [\"k\"]\nrequests_per_minute = 1.5\n", "requests_per_minute must be a whole"),
    ("[tenants.a]\nkeys = [\"k\"]\nallow_request_priority = 1\n", "allow_request_priority must be true or"),
    ("[tenants.a]\nkeys = [\"k\"\n", "not valid TOML"),
    ("[tenant.a]\nkeys = [\"k\"]\n", "expected [tenants.NAME] tables and nothing else (found tenant)"),
])
def test_a_bad_tenant_file_is_refused_naming_the_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=r"tenants\.toml") as err:
        load_key_file(write(tmp_path, text))
    assert message in str(err.value)


def test_toml_errors_carry_their_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"line 3"):
        load_key_file(write(tmp_path, "[tenants.a]\nkeys = [\"k\"]\nweight = = 2\n"))
