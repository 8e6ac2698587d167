"""Configuration of a benchmark run against a server (one frozen dataclass, validated once)."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlparse

from sglang_fair.core.errors import require

APIS = ("completions", "chat")
IDENTITIES = ("header", "user", "key")
FIRST_ID = 3  # ids below this are left out of token-id prompts (special tokens in most vocabularies)


@dataclass(frozen=True)
class LoadTestConfig:
    """Where to send the workload, how clients identify themselves, and how long to wait."""

    base_url: str = field(default="", metadata={"help": "server URL, e.g. http://127.0.0.1:30000"})
    api: str = field(default="completions", metadata={
        "help": "OpenAI endpoint: /v1/completions or /v1/chat/completions", "choices": APIS})
    model: str = field(default="", metadata={"help": "model name; empty = the first of /v1/models"})
    identity: str = field(default="header", metadata={
        "help": "how a client names itself: a header, the OpenAI 'user' field, or an API key",
        "choices": IDENTITIES})
    client_header: str = field(default="X-Client-Id", metadata={"help": "header of --identity header"})
    keys_file: str = field(default="", metadata={
        "help": "API_KEY CLIENT [WEIGHT] lines (sglang-fair serve --client-keys format), for --identity key"})
    grace: float = field(default=30.0, metadata={
        "help": "seconds after --duration to let sent programs finish; then in-flight calls are cut"})
    request_timeout: float = field(default=0.0, metadata={
        "help": "seconds one call may take (counted as a timeout error); 0 = until the run ends"})
    ignore_eos: bool = field(default=True, metadata={
        "help": "send ignore_eos so each call generates its workload's output length"})
    max_connections: int = field(default=512, metadata={"help": "open HTTP connections at most"})
    token_ids: int = field(default=0, metadata={
        "help": "send prompts as token ids below this vocabulary size, with earlier calls' output ids "
                "(the server must return them: SGLang's return_token_ids); 0 = send text"})
    fairness: bool = field(default=True, metadata={"help": "read /fairness at the end where served"})
    slo_ttft: float = field(default=2.0, metadata={
        "help": "TTFT target (s) of the summary's SLO attainment and goodput ([3] Table 2: Azure 2 s)"})
    slo_tpot: float = field(default=0.05, metadata={
        "help": "TPOT target (s): the worst running average per call, as [3] measures it"})

    def __post_init__(self) -> None:
        url = urlparse(self.base_url)
        require(url.scheme in ("http", "https") and bool(url.netloc),
                f"--base-url must be an http(s) URL like http://127.0.0.1:30000, got {self.base_url!r}")
        require(self.api in APIS, f"unknown api {self.api!r}; known: {', '.join(APIS)}")
        require(self.identity in IDENTITIES,
                f"unknown identity {self.identity!r}; known: {', '.join(IDENTITIES)}")
        require(self.identity != "key" or bool(self.keys_file), "--identity key needs --keys-file")
        require(bool(self.client_header.strip()), "--client-header must not be empty")
        require(self.grace >= 0, f"grace must be >= 0, got {self.grace}")
        require(self.request_timeout >= 0, f"request_timeout must be >= 0, got {self.request_timeout}")
        require(self.max_connections >= 1, f"max_connections must be >= 1, got {self.max_connections}")
        require(self.token_ids == 0 or self.token_ids > FIRST_ID,
                f"token_ids must be 0 (text) or a vocabulary size > {FIRST_ID}, got {self.token_ids}")
        require(self.token_ids == 0 or self.api == "completions", "--token-ids needs --api completions")
        for name in ("slo_ttft", "slo_tpot"):
            value = getattr(self, name)
            require(0 < value < float("inf"), f"--{name.replace('_', '-')} must be > 0 seconds, got {value}")

    @property
    def root(self) -> str:
        return self.base_url.rstrip("/").removesuffix("/v1")
