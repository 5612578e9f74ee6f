"""The shared entity messages (proto/metadata_entities.proto) on the gRPC wire: a node of
before them sent maps where they now have repeated Configs."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

from meta.entity_proto import configs_from_proto, configs_to_proto
from proto import metadata_entities_pb2 as pb

F = descriptor_pb2.FieldDescriptorProto
STRING, MESSAGE, OPTIONAL, REPEATED = (
    F.TYPE_STRING,
    F.TYPE_MESSAGE,
    F.LABEL_OPTIONAL,
    F.LABEL_REPEATED,
)


def map_message(number: int) -> Any:
    """A message whose only field, numbered ``number``, is a map<string, string>: what the
    older meta.proto declared there."""
    file = descriptor_pb2.FileDescriptorProto(name="older.proto", package="older", syntax="proto3")
    message = file.message_type.add(name="WithMap")
    entry = message.nested_type.add(name="Entry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=STRING, label=OPTIONAL)
    entry.field.add(name="value", number=2, type=STRING, label=OPTIONAL)
    message.field.add(
        name="configs",
        number=number,
        type=MESSAGE,
        label=REPEATED,
        type_name=".older.WithMap.Entry",
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("older.WithMap"))


@pytest.mark.parametrize(
    ("message", "field"),
    [
        (pb.Topic, "configs"),
        (pb.ConfigAlteration, "set_configs"),
        (pb.ResourceConfigAlteration, "set_configs"),
    ],
)
def test_config_lists_read_and_write_the_maps_they_replaced(
    message: type[Message], field: str
) -> None:
    configs = {"retention.ms": "1", "cleanup.policy": "compact"}
    older = map_message(message.DESCRIPTOR.fields_by_name[field].number)
    read = message.FromString(older(configs=configs).SerializeToString())
    assert configs_from_proto(getattr(read, field)) == configs
    written = message(**{field: configs_to_proto(configs)})
    assert dict(older.FromString(written.SerializeToString()).configs) == configs
