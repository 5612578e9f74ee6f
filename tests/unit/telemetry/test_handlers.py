"""ListConfigResources (74) by version and type, with its cluster authorization; the
telemetry handlers' client attributes (what CLIENT_METRICS `match` selectors test)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import anyio
from kio.schema.list_config_resources.v0.request import ListConfigResourcesRequest as RequestV0
from kio.schema.list_config_resources.v1.request import ListConfigResourcesRequest as RequestV1
from kio.static.primitive import i8

from dataplane.connection import Connection
from dataplane.handlers import list_config_resources
from dataplane.handlers.get_telemetry_subscriptions import client_attributes
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext


class Cache:
    topics = {"orders": object(), "audit": object()}

    def live_brokers(self) -> list[Any]:
        return [SimpleNamespace(id=1), SimpleNamespace(id=2)]

    def resource_names(self, resource_type: int) -> list[str]:
        return {16: ["subs-b", "subs-a"], 32: ["g1"]}.get(resource_type, [])


class Authorizer:
    def __init__(self, allow: bool) -> None:
        self.allow = allow

    def authorize(self, *_: Any, **__: Any) -> bool:
        return self.allow


def _ctx(version: int, allow: bool = True) -> Any:
    services = SimpleNamespace(cache=Cache(), authorizer=Authorizer(allow))
    header = SimpleNamespace(api_version=version, client_id="app-7")
    conn = Connection(
        peer="10.0.0.5:41234", host="10.0.0.5", client_software=("librdkafka", "2.16.0")
    )
    return RequestContext(services, header, conn, {})  # type: ignore[arg-type]


def _list(version: int, request: Any, allow: bool = True) -> Any:
    async def run() -> Any:
        return await list_config_resources.handle(_ctx(version, allow), request)

    return anyio.run(run)


def _names(response: Any) -> list[tuple[int, str]]:
    return [(int(r.resource_type), r.resource_name) for r in response.config_resources]


def test_v0_lists_client_metrics_subscriptions() -> None:
    response = _list(0, RequestV0())
    assert response.error_code == ErrorCode.none
    assert [r.resource_name for r in response.config_resources] == ["subs-a", "subs-b"]


def test_v1_by_type_and_all_types() -> None:
    response = _list(1, RequestV1(resource_types=(i8(16), i8(2))))
    assert _names(response) == [(2, "audit"), (2, "orders"), (16, "subs-a"), (16, "subs-b")]
    everything = _names(_list(1, RequestV1(resource_types=())))
    assert (4, "1") in everything
    assert (8, "2") in everything
    assert (32, "g1") in everything


def test_unsupported_type_and_authorization() -> None:
    assert _list(1, RequestV1(resource_types=(i8(1),))).error_code == ErrorCode.unsupported_version
    denied = _list(1, RequestV1(resource_types=()), allow=False)
    assert denied.error_code == ErrorCode.cluster_authorization_failed
    assert denied.config_resources == ()


def test_client_attributes() -> None:
    assert client_attributes(_ctx(0)) == {
        "client_id": "app-7",
        "client_software_name": "librdkafka",
        "client_software_version": "2.16.0",
        "client_source_address": "10.0.0.5",
        "client_source_port": "41234",
    }
