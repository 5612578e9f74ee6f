"""The replication Fetch RPC's codec: protobuf for the small fields, raw bytes for the batches.

A FetchResponse travels as a 4-byte length, the protobuf message (each partition's
`records_size` set), then each partition's batches back to back. Decoding hands out
memoryview slices of the received buffer, so the batches are never copied between the
network and the follower's segment file (see proto/replication.proto).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import grpc

from proto import replication_pb2

METHOD = "/rafka.replication.Replication/Fetch"
OPTIONS = [
    ("grpc.max_receive_message_length", 128 << 20),
    ("grpc.max_send_message_length", 128 << 20),
]
_LENGTH = struct.Struct(">I")

Records = bytes | memoryview


def encode_response(response: tuple[replication_pb2.FetchResponse, Sequence[Records]]) -> bytes:
    message, records = response
    header = message.SerializeToString()
    return b"".join([_LENGTH.pack(len(header)), header, *records])


def decode_response(data: bytes) -> tuple[replication_pb2.FetchResponse, list[memoryview]]:
    (size,) = _LENGTH.unpack_from(data, 0)
    view = memoryview(data)
    message = replication_pb2.FetchResponse.FromString(view[4 : 4 + size])
    records, pos = [], 4 + size
    for partition in message.partitions:
        records.append(view[pos : pos + partition.records_size])
        pos += partition.records_size
    if pos != len(data):
        raise ValueError(f"replication response of {len(data)} bytes, expected {pos}")
    return message, records


def method_handler(behavior: object) -> grpc.RpcMethodHandler:
    return grpc.stream_stream_rpc_method_handler(
        behavior,
        request_deserializer=replication_pb2.FetchRequest.FromString,
        response_serializer=encode_response,
    )


def fetch_stream(channel: grpc.aio.Channel) -> grpc.aio.StreamStreamMultiCallable:
    return channel.stream_stream(
        METHOD,
        request_serializer=replication_pb2.FetchRequest.SerializeToString,
        response_deserializer=decode_response,
    )
