"""The endpoint picker's flags (``--ext-proc-...``): one frozen :class:`ExtProcConfig`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from sglang_fair.core.errors import ConfigError, require


@dataclass(frozen=True)
class ExtProcConfig:
    """Where the gateway serves the Endpoint Picker Protocol (an Envoy ext_proc gRPC service)."""

    flag_prefix: ClassVar[str] = "ext_proc_"
    port: int = field(default=0, metadata={
        "help": "gRPC port of the endpoint picker (Gateway API Inference Extension: Envoy ext_proc), beside "
                "the HTTP port, with the same policy and replicas (0: off; needs the 'epp' extra)"})
    host: str = field(default="127.0.0.1", metadata={"help": "address the endpoint picker binds to"})
    tls_cert: str = field(default="", metadata={
        "help": "PEM certificate of the endpoint picker's TLS (with --ext-proc-tls-key; none: plaintext)"})
    tls_key: str = field(default="", metadata={"help": "PEM private key of --ext-proc-tls-cert"})

    def __post_init__(self) -> None:
        require(0 <= self.port < 65536, f"--ext-proc-port must be in 0..65535, got {self.port}")
        require(bool(self.tls_cert) == bool(self.tls_key),
                "--ext-proc-tls-cert and --ext-proc-tls-key go together")
        for flag, path in (("--ext-proc-tls-cert", self.tls_cert), ("--ext-proc-tls-key", self.tls_key)):
            if path:
                try:
                    Path(path).read_bytes()
                except OSError as err:
                    raise ConfigError(f"{flag}: cannot read {path}: {err}") from None

    def credentials(self) -> tuple[bytes, bytes] | None:
        """(certificate chain, private key) in PEM, or None for plaintext."""
        if not self.tls_cert:
            return None
        return Path(self.tls_cert).read_bytes(), Path(self.tls_key).read_bytes()
