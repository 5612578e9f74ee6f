"""EntityBuilder: one handler body for every version, but no silent loss of a misspelt field."""

from __future__ import annotations

from typing import Any

import pytest
from kio.static.constants import EntityType

from dataplane.protocol.codec import EntityBuilder, ResponseBuilder

METADATA = 3


def test_fields_a_version_lacks_are_dropped() -> None:
    v0 = ResponseBuilder(METADATA, 0)
    broker = v0.MetadataResponseBroker(node_id=1, host="h", port=9092, rack="r")
    assert not hasattr(broker, "rack")  # rack came in v1
    v1: Any = ResponseBuilder(METADATA, 1).MetadataResponseBroker(  # the v1 class has rack
        node_id=1, host="h", port=9092, rack="r"
    )
    assert v1.rack == "r"


def test_a_field_of_no_version_raises() -> None:
    with pytest.raises(TypeError, match="rakc"):
        ResponseBuilder(METADATA, 12).MetadataResponseBroker(node_id=1, host="h", port=1, rakc="r")


def test_a_class_of_no_version_raises() -> None:
    with pytest.raises(AttributeError, match="MetadataResponseBrokr"):
        EntityBuilder(METADATA, 12, EntityType.response).MetadataResponseBrokr()
