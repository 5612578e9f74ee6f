"""Generate Python codecs from Kafka's JSON message specs (``proto/kafka-message-specs``).

Run from anywhere: ``python -m proto.generate_records``. Two kinds of output, both committed
(``tests/unit/protocol/test_records_generated.py`` fails when one is stale):

* record modules (`RECORD_MODULES`): per spec a frozen dataclass (nested structs as nested
  classes, as Kafka's generated Java has them) and a `Message` schema that
  `dataplane.protocol.message_codec` reads and writes at every version of the spec;
* kio modules (`KIO_MODULES`): one version of a request or response in the form kio generates,
  for the versions Kafka 4 removed and kio therefore lacks.

The spec format is Kafka's (see its ``generator/`` and ``clients/src/main/resources/common/
message/README.md``): versions, flexibleVersions, nullableVersions, taggedVersions and tag,
default, struct and array fields (inline ``fields`` or ``commonStructs``); ``// comments`` are
allowed. Field names become snake_case.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
SPEC_DIR = REPO_ROOT / "proto" / "kafka-message-specs"

RECORD_MODULES: dict[str, tuple[str, ...]] = {
    "dataplane/coordinator/record_schemas.py": (
        "OffsetCommitKey",
        "OffsetCommitValue",
        "GroupMetadataKey",
        "GroupMetadataValue",
        "ConsumerGroupMetadataKey",
        "ConsumerGroupMetadataValue",
        "ConsumerGroupPartitionMetadataKey",
        "ConsumerGroupPartitionMetadataValue",
        "ConsumerGroupMemberMetadataKey",
        "ConsumerGroupMemberMetadataValue",
        "ConsumerGroupTargetAssignmentMetadataKey",
        "ConsumerGroupTargetAssignmentMetadataValue",
        "ConsumerGroupTargetAssignmentMemberKey",
        "ConsumerGroupTargetAssignmentMemberValue",
        "ConsumerGroupCurrentMemberAssignmentKey",
        "ConsumerGroupCurrentMemberAssignmentValue",
        "ConsumerGroupRegularExpressionKey",
        "ConsumerGroupRegularExpressionValue",
    ),
    "dataplane/transaction/record_schemas.py": ("TransactionLogKey", "TransactionLogValue"),
    "dataplane/coordinator/share/schemas.py": tuple(
        f"ShareGroup{name}{part}"
        for name in (
            "MemberMetadata",
            "Metadata",
            "TargetAssignmentMetadata",
            "TargetAssignmentMember",
            "CurrentMemberAssignment",
            "StatePartitionMetadata",
        )
        for part in ("Key", "Value")
    ),
    "dataplane/coordinator/streams/schemas.py": tuple(
        f"StreamsGroup{name}{part}"
        for name in (
            "Metadata",
            "Topology",
            "MemberMetadata",
            "TargetAssignmentMetadata",
            "TargetAssignmentMember",
            "CurrentMemberAssignment",
        )
        for part in ("Key", "Value")
    ),
    "dataplane/share/state_record_schemas.py": (
        "ShareSnapshotKey",
        "ShareSnapshotValue",
        "ShareUpdateKey",
        "ShareUpdateValue",
    ),
}
"""Output module -> the specs it holds (the __consumer_offsets, __transaction_state and
__share_group_state records)."""

KIO_MODULES: dict[str, tuple[str, int]] = {
    "dataplane/protocol/legacy/offset_commit_v0_request.py": ("OffsetCommitRequest", 0),
    "dataplane/protocol/legacy/offset_commit_v1_request.py": ("OffsetCommitRequest", 1),
    "dataplane/protocol/legacy/describe_configs_v0_request.py": ("DescribeConfigsRequest", 0),
    "dataplane/protocol/legacy/describe_configs_v0_response.py": ("DescribeConfigsResponse", 0),
    "dataplane/protocol/legacy/delete_groups_v3_request.py": ("DeleteGroupsRequest", 3),
    "dataplane/protocol/legacy/delete_groups_v3_response.py": ("DeleteGroupsResponse", 3),
    "dataplane/protocol/legacy/api_versions_v5_request.py": ("ApiVersionsRequest", 5),
    "dataplane/protocol/legacy/api_versions_v5_response.py": ("ApiVersionsResponse", 5),
    "dataplane/protocol/legacy/txn_offset_commit_v6_request.py": ("TxnOffsetCommitRequest", 6),
    "dataplane/protocol/legacy/txn_offset_commit_v6_response.py": ("TxnOffsetCommitResponse", 6),
    "dataplane/protocol/legacy/streams_group_heartbeat_v1_request.py": (
        "StreamsGroupHeartbeatRequest",
        1,
    ),
    "dataplane/protocol/legacy/streams_group_heartbeat_v1_response.py": (
        "StreamsGroupHeartbeatResponse",
        1,
    ),
    "dataplane/protocol/legacy/streams_group_describe_v1_request.py": (
        "StreamsGroupDescribeRequest",
        1,
    ),
    "dataplane/protocol/legacy/streams_group_describe_v1_response.py": (
        "StreamsGroupDescribeResponse",
        1,
    ),
    "dataplane/protocol/legacy/streams_group_topology_description_update_v0_request.py": (
        "StreamsGroupTopologyDescriptionUpdateRequest",
        0,
    ),
    "dataplane/protocol/legacy/streams_group_topology_description_update_v0_response.py": (
        "StreamsGroupTopologyDescriptionUpdateResponse",
        0,
    ),
    "dataplane/protocol/legacy/unregister_controller_v0_request.py": (
        "UnregisterControllerRequest",
        0,
    ),
    "dataplane/protocol/legacy/unregister_controller_v0_response.py": (
        "UnregisterControllerResponse",
        0,
    ),
}
"""Output module -> (spec, version), in kio's generated form."""

MAX_VERSION = 0x7FFF
_HEADER = "# Generated by proto/generate_records.py from proto/kafka-message-specs. DO NOT EDIT!\n"


# ---------------------------------------------------------------- the spec model


Versions = tuple[int, int]
NONE: Versions = (1, 0)


def parse_versions(spec: str | None, default: Versions = NONE) -> Versions:
    """Kafka's version syntax: "0+", "3", "0-4", "none"."""
    if spec is None:
        return default
    if spec == "none":
        return NONE
    if spec.endswith("+"):
        return (int(spec[:-1]), MAX_VERSION)
    low, _, high = spec.partition("-")
    return (int(low), int(high or low))


def _intersect(a: Versions, b: Versions) -> Versions:
    low, high = max(a[0], b[0]), min(a[1], b[1])
    return (low, high) if low <= high else NONE


def snake(name: str) -> str:
    """Kafka's CamelCase / camelCase field name as a Python attribute."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


@dataclass
class FieldSpec:
    name: str  # as in the spec
    type: str  # "int32", "[]int32", "[]Struct", "Struct", ...
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    default: Any  # the spec's "default", or None when it has none
    has_default: bool
    about: str
    entity_type: str | None
    struct: StructSpec | None  # the struct of a struct or struct-array field

    @property
    def attr(self) -> str:
        return snake(self.name)

    @property
    def element(self) -> str:
        return self.type[2:] if self.type.startswith("[]") else self.type


@dataclass
class StructSpec:
    name: str
    fields: list[FieldSpec]


@dataclass
class MessageSpec:
    name: str
    kind: str  # "coordinator-key", "coordinator-value", "request", "response", "data"
    api_key: int | None
    valid: Versions
    flexible: Versions
    struct: StructSpec
    file: str


PRIMITIVES = {"bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64"}
PRIMITIVES |= {"string", "bytes", "uuid"}


def strip_comments(text: str) -> str:
    """Drop the ``//`` comments Kafka's specs carry (outside JSON strings)."""
    out, in_string, i = [], False, 0
    while i < len(text):
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\":
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
            out.append(c)
        elif text.startswith("//", i):
            while i < len(text) and text[i] != "\n":
                i += 1
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def load_spec(name: str, spec_dir: Path = SPEC_DIR) -> MessageSpec:
    raw = json.loads(strip_comments((spec_dir / f"{name}.json").read_text()))
    common = {s["name"]: s for s in raw.get("commonStructs", [])}
    built: dict[str, StructSpec] = {}

    def struct_of(name: str, fields: list[dict[str, Any]] | None) -> StructSpec:
        if fields is None:  # a common struct, built once
            if name not in built:
                built[name] = StructSpec(name, [])
                built[name].fields = [field(f) for f in common[name]["fields"]]
            return built[name]
        return StructSpec(name, [field(f) for f in fields])

    def field(f: dict[str, Any]) -> FieldSpec:
        for unsupported in ("flexibleVersions", "zeroCopy"):
            if unsupported in f:
                raise NotImplementedError(f"{name}.{f['name']}: {unsupported}")
        element = f["type"].removeprefix("[]")
        if element == "records":
            raise NotImplementedError(f"{name}.{f['name']}: records fields")
        struct = None if element in PRIMITIVES else struct_of(element, f.get("fields"))
        return FieldSpec(
            name=f["name"],
            type=f["type"],
            # a tagged-only field's versions are its tagged versions, as Kafka's FieldSpec has it
            versions=parse_versions(f.get("versions", f.get("taggedVersions"))),
            nullable=parse_versions(f.get("nullableVersions")),
            tagged=parse_versions(f.get("taggedVersions")),
            tag=f.get("tag"),
            default=f.get("default"),
            has_default="default" in f,
            about=f.get("about", ""),
            entity_type=f.get("entityType"),
            struct=struct,
        )

    return MessageSpec(
        name=raw["name"],
        kind=raw["type"],
        api_key=raw.get("apiKey"),
        valid=parse_versions(raw["validVersions"]),
        flexible=parse_versions(raw.get("flexibleVersions"), NONE),
        struct=StructSpec(raw["name"], [field(f) for f in raw["fields"]]),
        file=f"{name}.json",
    )


def _nested_structs(struct: StructSpec) -> list[StructSpec]:
    """The structs `struct` contains, each once, in the order they first appear."""
    seen: list[StructSpec] = []
    for f in struct.fields:
        if f.struct is not None and all(s is not f.struct for s in seen):
            seen.append(f.struct)
    return seen


# ---------------------------------------------------------------- record modules


_PY_TYPES = {"bool": "bool", "float64": "float", "string": "str", "bytes": "bytes"}
_PY_TYPES["uuid"] = "bytes"


def _py_type(f: FieldSpec, valid: Versions) -> str:
    element = f.struct.name if f.struct is not None else _PY_TYPES.get(f.element, "int")
    text = f"tuple[{element}, ...]" if f.type.startswith("[]") else element
    return f"{text} | None" if _intersect(f.nullable, valid) != NONE else text


def _default(f: FieldSpec) -> str:
    """The Python literal of a field's default, as Kafka's generated code defines it."""
    value = f.default
    if (value is None and f.has_default) or value == "null":
        return "None"
    if f.type.startswith("[]"):
        if f.has_default and value != "":
            raise NotImplementedError(f"{f.name}: array default {value!r}")
        return "()"
    if f.struct is not None:
        return f"{f.struct.name}()"
    t = f.type
    if t == "string":
        return repr(value if f.has_default else "")
    if t == "bytes":
        return 'b""'
    if t == "uuid":
        return "ZERO_UUID"
    if t == "bool":
        return "True" if str(value).lower() == "true" else "False"
    if t == "float64":
        return repr(float(value)) if f.has_default else "0.0"
    if not f.has_default or value == "":
        return "0"
    return str(int(value, 0) if isinstance(value, str) else int(value))


def _versions(versions: Versions) -> str:
    if versions == NONE:
        return "NO_VERSIONS"
    return "ALL_VERSIONS" if versions == (0, MAX_VERSION) else str(versions)


def _versions_arg(keyword: str, versions: Versions, default: Versions) -> str:
    return "" if versions == default else f", {keyword}={_versions(versions)}"


def _schema_type(f: FieldSpec, struct_consts: dict[int, str]) -> str:
    element = struct_consts[id(f.struct)] if f.struct is not None else repr(f.element)
    return f"ArrayOf({element})" if f.type.startswith("[]") else element


def record_module(specs: list[MessageSpec]) -> str:
    """The source of a module of record classes and schemas (not yet formatted)."""
    return _RecordModule(specs).emit()


class _RecordModule:
    def __init__(self, specs: list[MessageSpec]) -> None:
        self.specs = specs
        self.lines: list[str] = []

    def emit(self) -> str:
        files = "".join(f"\n* {s.file}" for s in self.specs)
        self.lines += [
            _HEADER.rstrip("\n"),
            f'"""Record classes and schemas generated from Kafka\'s message specs:\n{files}\n"""',
            "",
            "from __future__ import annotations",
            "",
            "from dataclasses import dataclass",
            "",
            "from dataplane.protocol.message_codec import (",
            "    ALL_VERSIONS, NO_VERSIONS, ArrayOf, Field, Message, Struct, Tags",
            ")",
            "",
            "ZERO_UUID = bytes(16)",
            "",
        ]
        for spec in self.specs:
            self._message(spec)
        for kind, table in (("coordinator-key", "KEYS"), ("coordinator-value", "VALUES")):
            entries = [s for s in self.specs if s.kind == kind]
            if entries:
                self.lines.append(f"{table}: dict[int, Message] = {{")
                self.lines += [f"    {s.api_key}: {_const(s.name)}," for s in entries]
                self.lines.append("}")
                self.lines.append(f'"""The {kind} schemas by record type."""')
                self.lines.append("")
        return "\n".join(self.lines) + "\n"

    def _message(self, spec: MessageSpec) -> None:
        flexible = _intersect(spec.flexible, spec.valid) != NONE
        self._class(spec.struct, spec, flexible, indent="")
        consts: dict[int, str] = {}
        self._schema(spec.struct, spec, flexible, consts, spec.name)
        api_key = f", api_key={spec.api_key}" if spec.api_key is not None else ""
        valid, flexible_versions = _versions(spec.valid), _versions(spec.flexible)
        self.lines += [
            f"{_const(spec.name)} = Message(",
            f"    {spec.name!r}, {valid}, {flexible_versions}, {consts[id(spec.struct)]}{api_key}",
            ")",
            "",
        ]

    def _class(self, struct: StructSpec, spec: MessageSpec, flexible: bool, indent: str) -> None:
        add = self.lines.append
        add(f"{indent}@dataclass(frozen=True, slots=True)")
        add(f"{indent}class {struct.name}:")
        if struct is spec.struct:
            record = f"record type {spec.api_key}, " if spec.api_key is not None else ""
            versions = "-".join(str(v) for v in sorted(set(spec.valid)))
            add(f'{indent}    """{spec.kind} {spec.name} ({record}versions {versions})."""')
            add("")
        for nested in _nested_structs(struct):
            self._class(nested, spec, flexible, indent + "    ")
        for f in struct.fields:
            add(f"{indent}    {f.attr}: {_py_type(f, spec.valid)} = {_default(f)}")
            if f.about:
                add(_docstring(f.about, indent + "    "))
        if flexible:
            add(f"{indent}    unknown_tags: Tags = ()")
            add(
                _docstring(
                    "Tagged fields the schema does not know, kept verbatim.", indent + "    "
                )
            )
        if not struct.fields and not flexible:
            add(f"{indent}    pass")
        add("")

    def _schema(
        self,
        struct: StructSpec,
        spec: MessageSpec,
        flexible: bool,
        consts: dict[int, str],
        path: str,
    ) -> None:
        """Emit the `Struct` constants of `struct` and its nested structs (innermost first)."""
        for nested in _nested_structs(struct):
            if id(nested) not in consts:
                self._schema(nested, spec, flexible, consts, f"{path}.{nested.name}")
        name = f"_{_const(path.replace('.', '_'))}"
        consts[id(struct)] = name
        self.lines.append(f"{name} = Struct(")
        self.lines.append(f"    {path},")
        self.lines.append("    (")
        for f in struct.fields:
            args = [repr(f.attr), _schema_type(f, consts)]
            text = ", ".join(args)
            text += _versions_arg("versions", f.versions, (0, MAX_VERSION))
            text += _versions_arg("nullable", f.nullable, NONE)
            text += _versions_arg("tagged", f.tagged, NONE)
            if f.tag is not None:
                text += f", tag={f.tag}"
            if (default := _default(f)) != "None":
                text += f", default={_qualify(default, path)}"
            self.lines.append(f"        Field({text}),")
        self.lines.append("    ),")
        if flexible:
            self.lines.append("    keeps_tags=True,")
        self.lines.append(")")


def _qualify(default: str, path: str) -> str:
    """A nested struct's default instance, named from module level."""
    return f"{path}.{default}" if default.endswith("()") and default != "()" else default


def _const(name: str) -> str:
    return snake(name).upper()


def _docstring(text: str, indent: str) -> str:
    """A docstring at `indent`, wrapped to the line length (ruff format does not wrap them)."""
    text = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    return textwrap.fill(
        f'"""{text}"""', width=100, initial_indent=indent, subsequent_indent=indent
    )


# ---------------------------------------------------------------- kio modules

_KIO_INTS = {"int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64"}
_KIO_INTS |= {"uint16": "u16", "uint32": "u32"}
_KIO_TIMEDELTAS = {"int32": "i32Timedelta", "int64": "i64Timedelta"}
_KIO_ENTITY_TYPES = {
    "groupId": "GroupId",
    "topicName": "TopicName",
    "brokerId": "BrokerId",
    "transactionalId": "TransactionalId",
    "producerId": "ProducerId",
}


def _natural(name: str) -> list[int | str]:
    """Sort key of names with numbers as ruff's isort orders them (i8 before i16)."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def kio_module(spec: MessageSpec, version: int) -> str:  # noqa: C901 - kio's generator: one branch per field kind
    """One version of a request or response, as kio's code generator writes it."""
    if spec.kind not in ("request", "response"):
        raise ValueError(f"{spec.name} is a {spec.kind}, not a request or response")
    flexible = spec.flexible[0] <= version <= spec.flexible[1]
    header = (
        ("request_header", "RequestHeader", 2 if flexible else 1)
        if spec.kind == "request"
        # ApiVersions answers with header v0 at every version (KIP-511)
        else ("response_header", "ResponseHeader", 1 if flexible and spec.api_key != 18 else 0)
    )
    imports = {"i16"}
    types: set[str] = set()
    error_codes: set[str] = set()
    modules: set[str] = set()  # of the standard library
    classes: list[str] = []
    emitted: set[str] = set()  # a common struct used by several fields is one class

    def present(f: FieldSpec) -> bool:
        return f.versions[0] <= version <= f.versions[1]

    def emit(struct: StructSpec, kind: str) -> None:  # noqa: C901 - kio's generator: one branch per field kind
        if struct.name in emitted:
            return
        emitted.add(struct.name)
        for f in struct.fields:
            if present(f) and f.struct is not None:
                emit(f.struct, "nested")
        lines = [
            "@dataclass(frozen=True, slots=True, kw_only=True)",
            f"class {struct.name}:",
            f"    __type__: ClassVar = EntityType.{kind}",
            f"    __version__: ClassVar[i16] = i16({version})",
            f"    __flexible__: ClassVar[bool] = {flexible}",
            f"    __api_key__: ClassVar[i16] = i16({spec.api_key})",
            f"    __header_schema__: ClassVar[type[{header[1]}]] = {header[1]}",
        ]
        for f in struct.fields:
            if not present(f):
                continue
            tagged = f.tag is not None and f.tagged[0] <= version <= f.tagged[1]
            nullable = f.nullable[0] <= version <= f.nullable[1]
            attr, kafka_type = f.attr, f.element
            if f.struct is not None:
                py = f.struct.name
            elif f.element == "int16" and f.name.endswith("ErrorCode"):
                # kio's rule: error codes are its ErrorCode enum
                py, kafka_type = "ErrorCode", "error_code"
                error_codes.add(py)
            elif f.element in _KIO_TIMEDELTAS and f.name.endswith("Ms") and not f.has_default:
                # kio's rule: a duration in milliseconds is a timedelta, named without "Ms"
                attr, py = snake(f.name[:-2]), _KIO_TIMEDELTAS[f.element]
                kafka_type = f"timedelta_{_KIO_INTS[f.element]}"
                imports.add(py)
            elif f.element in _KIO_INTS:
                py = _KIO_INTS[f.element]
                imports.add(py)
            elif f.element == "string" and f.entity_type in _KIO_ENTITY_TYPES:
                py = _KIO_ENTITY_TYPES[f.entity_type]
                types.add(py)
            elif f.element == "uuid":  # kio's: a UUID, None for the zero one
                py, nullable = "uuid.UUID", True
                modules.add("uuid")
            else:
                py = _PY_TYPES.get(f.element, f.element)
            if f.type.startswith("[]"):
                py = f"tuple[{py}, ...]"
            if nullable:
                py += " | None"
            metadata: dict[str, object] = {} if f.struct is not None else {"kafka_type": kafka_type}
            if tagged:
                metadata["tag"] = f.tag
            args = [f"metadata={metadata!r}".replace("'", '"')] if metadata else []
            if f.has_default or tagged:
                args.append(f"default={_kio_default(f, py)}")
            value = f" = field({', '.join(args)})" if args else ""
            lines.append(f"    {attr}: {py}{value}")
            lines.append(_docstring(f.about, "    "))
        classes.append("\n".join(lines))

    emit(spec.struct, spec.kind)
    source = [
        _HEADER.rstrip("\n"),
        _docstring(
            f"{spec.name} v{version} in the form kio generates, from Kafka's {spec.file}.", ""
        ),
        "",
        *(f"import {m}" for m in sorted(modules)),
        "from dataclasses import dataclass, field",
        "from typing import ClassVar",
        "",
        f"from kio.schema.{header[0]}.v{header[2]}.header import {header[1]}",
    ]
    if error_codes:
        source.insert(-1, "from kio.schema.errors import ErrorCode")
    if types:
        source.append(f"from kio.schema.types import {', '.join(sorted(types))}")
    source += [
        "from kio.static.constants import EntityType",
        f"from kio.static.primitive import {', '.join(sorted(imports, key=_natural))}",
        "",
        "",
    ]
    return "\n".join(source) + "\n\n\n".join(classes) + "\n"


def _kio_default(f: FieldSpec, py: str) -> str:
    """A field's default in kio's form: ints wrapped in their kio type, null as None, a tagged
    array empty."""
    if f.default == "null":
        return "None"
    if f.type.startswith("[]"):
        if f.has_default and f.default != "":
            raise NotImplementedError(f"{f.name}: array default {f.default!r}")
        return "()"
    if f.element in _KIO_INTS and py in _KIO_INTS.values():
        value = f.default if f.has_default else 0
        return f"{py}({int(value, 0) if isinstance(value, str) else value})"
    if f.element in ("bool", "string"):
        return _default(f)
    raise NotImplementedError(f"{f.name}: a {f.type} default in kio modules")


# ---------------------------------------------------------------- driver


def _format(source: str, path: str) -> str:
    """`ruff format` the source (a test/dev dependency, as grpc_tools is for proto/)."""
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", path, "-"],
        input=source,
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO_ROOT,
    )
    return done.stdout


def generate(out_dir: Path = REPO_ROOT) -> list[Path]:
    """Write every generated module under `out_dir`; return the files written."""
    outputs: dict[str, str] = {}
    for module, names in RECORD_MODULES.items():
        outputs[module] = record_module([load_spec(n) for n in names])
    for module, (name, version) in KIO_MODULES.items():
        outputs[module] = kio_module(load_spec(name), version)
    written = []
    for module, source in outputs.items():
        path = out_dir / module
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_format(source, module))
        written.append(path)
    return written


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO_ROOT, help="output root (default: repo)")
    for written_path in generate(parser.parse_args().out):
        print(written_path)
