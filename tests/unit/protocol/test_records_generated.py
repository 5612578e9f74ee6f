"""The generated record codecs: up to date with their specs, and general over Kafka's format."""

from __future__ import annotations

import json
from pathlib import Path

from dataplane.protocol.message_codec import Message
from proto.generate_records import REPO_ROOT, generate, load_spec, record_module


def test_generated_modules_are_up_to_date(tmp_path: Path) -> None:
    written = generate(tmp_path)
    assert written
    for fresh in written:
        committed = REPO_ROOT / fresh.relative_to(tmp_path)
        assert committed.read_text() == fresh.read_text(), (
            f"{committed} is stale: run `python -m proto.generate_records`"
        )


SPEC = {
    "apiKey": 99,
    "type": "coordinator-value",
    "name": "SampleValue",
    "validVersions": "0-2",
    "flexibleVersions": "2+",
    "fields": [
        {"name": "Flag", "type": "bool", "versions": "0+", "default": "true"},
        {"name": "Small", "type": "int16", "versions": "0+", "default": "0x10"},
        {"name": "Port", "type": "uint16", "versions": "1+"},
        {"name": "Ratio", "type": "float64", "versions": "0+", "default": "0.5"},
        {
            "name": "Label",
            "type": "string",
            "versions": "0+",
            "nullableVersions": "1+",
            "default": "null",
        },
        {
            "name": "Owner",
            "type": "Owner",
            "versions": "1+",
            "nullableVersions": "1+",
            "default": "null",
            "fields": [{"name": "Name", "type": "string", "versions": "0+"}],
        },
        {"name": "Ids", "type": "[]uuid", "versions": "0+"},
        {
            "name": "Note",
            "type": "string",
            "versions": "2+",
            "taggedVersions": "2+",
            "tag": 3,
            "default": "none",
        },
    ],
}


def test_a_spec_with_every_kind_of_field(tmp_path: Path) -> None:
    # // comments are allowed, as in Kafka's specs
    (tmp_path / "SampleValue.json").write_text("// a comment\n" + json.dumps(SPEC))
    namespace: dict[str, object] = {}
    exec(compile(record_module([load_spec("SampleValue", tmp_path)]), "sample", "exec"), namespace)
    cls, schema = namespace["SampleValue"], namespace["SAMPLE_VALUE"]
    assert isinstance(schema, Message)
    assert schema.api_key == 99
    default = cls()  # type: ignore[operator]
    assert (default.flag, default.small, default.ratio, default.label, default.owner) == (
        True,
        16,
        0.5,
        None,
        None,
    )
    assert default.note == "none"
    assert default.ids == ()
    owner = cls.Owner("me")  # type: ignore[attr-defined]
    value = cls(False, -2, 8080, 1.5, "x", owner, (bytes(16), bytes(range(16))), "hi")  # type: ignore[operator]
    for version in (0, 1, 2):
        data = schema.encode(value, version)
        decoded, end = schema.decode(data, version)
        assert end == len(data)
        # fields a version lacks read as their defaults
        assert decoded.port == (8080 if version >= 1 else 0)
        assert decoded.owner == (owner if version >= 1 else None)
        assert decoded.note == ("hi" if version == 2 else "none")
        assert schema.encode(decoded, version) == (data if version else schema.encode(decoded, 0))
    # the tagged Note is left out at its default
    plain = schema.encode(cls(note="none"), 2)  # type: ignore[operator]
    assert plain.endswith(b"\x00")
    assert b"none" not in plain
