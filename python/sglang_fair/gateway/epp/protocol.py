"""What the Endpoint Picker Protocol (Gateway API Inference Extension, proposal 004, v1.0.0) says, as
functions over the ext_proc messages of ``messages.py``.

The data plane (Envoy's ext_proc filter, request and response bodies FULL_DUPLEX_STREAMED) sends a
request's headers, then its body in chunks; the picker answers, once it has the whole body, with the
headers response that names the endpoint (``x-gateway-destination-endpoint`` header and the same value
in the ``envoy.lb`` dynamic metadata, route cache cleared) followed by the body, streamed back in chunks;
or with an immediate response (429, 503, ...). The response's headers are answered, and each response
body chunk is streamed back as it came. The data plane may name the endpoints allowed
(``envoy.lb.subset_hint`` / ``x-gateway-destination-endpoint-subset``) and, with the response, the one
that served (``envoy.lb`` / ``x-gateway-destination-endpoint-served``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from sglang_fair.gateway.epp import messages as m

DESTINATION = "x-gateway-destination-endpoint"
SERVED = "x-gateway-destination-endpoint-served"
SUBSET = "x-gateway-destination-endpoint-subset"
LB_NAMESPACE = "envoy.lb"
SUBSET_NAMESPACE = "envoy.lb.subset_hint"
OVERWRITE = m.enum_value("envoy.config.core.v3.HeaderValueOption.HeaderAppendAction",
                         "OVERWRITE_IF_EXISTS_OR_ADD")
CHUNK_BYTES = 62_000  # per streamed body message (what GIE's picker sends: below Envoy's buffer limits)


def headers_of(http_headers: Any) -> dict[str, str]:
    """An ``HttpHeaders`` message as lower-case name -> value (``raw_value`` as Envoy sends it)."""
    out: dict[str, str] = {}
    for h in http_headers.headers.headers:
        out[h.key.lower()] = h.raw_value.decode("utf-8", "replace") if h.raw_value else h.value
    return out


def to_python(value: Any) -> Any:
    """A ``google.protobuf.Value`` (or ``Struct``) as plain Python."""
    if value.DESCRIPTOR.full_name == "google.protobuf.Struct":
        return {k: to_python(v) for k, v in value.fields.items()}
    kind = value.WhichOneof("kind")
    if kind == "struct_value":
        return to_python(value.struct_value)
    if kind == "list_value":
        return [to_python(v) for v in value.list_value.values]
    return None if kind in (None, "null_value") else getattr(value, kind)


def filter_metadata(request: Any, namespace: str) -> dict[str, Any]:
    """The request's ``metadata_context`` entry of ``namespace`` (empty if none)."""
    entry = request.metadata_context.filter_metadata.get(namespace)
    return to_python(entry) if entry is not None else {}


def endpoint_list(value: Any) -> list[str]:
    """``ip:port`` endpoints of a metadata value: a list, or one comma-separated string."""
    items = value if isinstance(value, list) else [value]
    return [e.strip() for item in items if isinstance(item, str) for e in item.split(",") if e.strip()]


def subset(request: Any) -> list[str] | None:
    """The endpoints the data plane allows for this request (None: any of the pool)."""
    hint = filter_metadata(request, SUBSET_NAMESPACE)
    return endpoint_list(hint[SUBSET]) if SUBSET in hint else None


def served(request: Any) -> str | None:
    """The endpoint that served the request, as the data plane reports it with the response."""
    value = filter_metadata(request, LB_NAMESPACE).get(SERVED)
    return value if isinstance(value, str) else None


def _set(headers: Mapping[str, str], remove: tuple[str, ...] = ()) -> Any:
    """Set ``headers`` (replacing any value the client sent) and remove ``remove``."""
    values = [m.HeaderValue(key=k, raw_value=v.encode()) for k, v in headers.items()]
    options = [m.HeaderValueOption(header=v, append_action=OVERWRITE) for v in values]
    return m.HeaderMutation(set_headers=options, remove_headers=list(remove))


def route_to(endpoint: str, headers: Mapping[str, str], remove: tuple[str, ...] = ()) -> Any:
    """The request headers' answer: go to ``endpoint`` (header and metadata), with ``headers`` set
    and ``remove`` removed."""
    lb = m.Struct(fields={DESTINATION: m.Value(string_value=endpoint)})
    mutation = _set({DESTINATION: endpoint, **headers}, remove)
    common = m.CommonResponse(header_mutation=mutation, clear_route_cache=True)
    return m.ProcessingResponse(request_headers=m.HeadersResponse(response=common),
                                dynamic_metadata=m.Struct(fields={LB_NAMESPACE: m.Value(struct_value=lb)}))


def body_chunks(body: bytes, which: str, end: bool = True) -> Iterator[Any]:
    """``body`` streamed back as ``which`` (``request_body`` or ``response_body``) in FULL_DUPLEX_STREAMED."""
    starts = range(0, len(body), CHUNK_BYTES) if body else range(1)
    for start in starts:
        chunk = body[start:start + CHUNK_BYTES]
        last = end and start + CHUNK_BYTES >= len(body)
        mutation = m.BodyMutation(streamed_response=m.StreamedBodyResponse(body=chunk, end_of_stream=last))
        yield m.ProcessingResponse(**{which: _body(mutation)})


def whole_body(body: bytes) -> Any:
    """The request body's answer when the data plane sends it BUFFERED: the body replaced whole."""
    mutation = m.BodyMutation(body=body)
    return m.ProcessingResponse(request_body=_body(mutation))


def _body(mutation: Any) -> Any:
    return m.BodyResponse(response=m.CommonResponse(body_mutation=mutation))


def passed(which: str) -> Any:
    """An answer that changes nothing (response headers, trailers)."""
    kind = m.TrailersResponse() if which.endswith("trailers") else m.HeadersResponse()
    return m.ProcessingResponse(**{which: kind})


def immediate(status: int, body: Any, headers: Mapping[str, str] | None = None) -> Any:
    """A locally generated answer: ``status`` with a JSON ``body`` (the gateway's error bodies)."""
    all_headers = {"content-type": "application/json", **(headers or {})}
    return m.ProcessingResponse(immediate_response=m.ImmediateResponse(
        status=m.HttpStatus(code=status), headers=_set(all_headers), body=json.dumps(body).encode(),
        details=f"sglang_fair_epp_{status}"))
