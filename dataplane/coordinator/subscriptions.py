"""What a KIP-848 group's target assignment is computed from: the subscribed topics' metadata
hash (KIP-1101: its change bumps the group epoch) and subscribed regular expressions, resolved
against the cluster's topic names."""

from __future__ import annotations

import hashlib
import re
import struct
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache

from dataplane.coordinator.assignors import TopicMetadata
from dataplane.protocol.errors import ErrorCode, KafkaError

# -- regular expressions ---------------------------------------------------------------------
# Kafka compiles subscribed regexes with RE2/J; Rafka resolves them with Python's `re` after
# refusing, as RE2 does, what only Python accepts (lookarounds, back-references, \\Z, comments,
# repeat counts over 1000), and says why in RE2/J's words.

# (start of Python's re.error message, RE2/J's description of the same mistake)
_RE2_DESCRIPTIONS = (
    ("unterminated character set", "missing closing ]"),
    ("missing ), unterminated subpattern", "missing closing )"),
    ("unbalanced parenthesis", "regexp/syntax: internal error"),  # RE2/J's answer to a stray )
    ("nothing to repeat", "missing argument to repetition operator"),
    ("multiple repeat", "invalid nested repetition operator"),
    ("bad escape (end of pattern)", "trailing backslash at end of expression"),
    ("bad escape", "invalid escape sequence"),
    ("bad character range", "invalid character class range"),
    ("min repeat greater than max repeat", "invalid repeat count"),
    ("unknown extension ?<", "invalid named capture"),
    ("missing >, unterminated name", "invalid named capture"),
    ("bad character in group name", "invalid named capture"),
    ("unknown extension", "invalid or unsupported Perl syntax"),
)
_PERL_ONLY = ("(?=", "(?!", "(?<=", "(?<!", "(?P=", "(?#", "(?>")
_REPEAT = re.compile(r"\{(\d+)(?:,(\d*))?\}")
_NAMED_GROUP = re.compile(r"\(\?<(?=[A-Za-z_])")
_MAX_REPEAT = 1000


def _re2_only_problem(regex: str) -> str | None:
    """What RE2 refuses in `regex` although Python's `re` accepts it, as RE2/J says it."""
    i, in_class = 0, False
    while i < len(regex):
        c = regex[i]
        if c == "\\":
            if not in_class and regex[i + 1 : i + 2] in tuple("123456789Z"):
                return "invalid escape sequence"
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            i += 2 if regex.startswith("[^]", i) else 1 if regex.startswith("[]", i) else 0
        elif regex.startswith(_PERL_ONLY, i):
            return "invalid or unsupported Perl syntax"
        elif (
            c == "{"
            and (m := _REPEAT.match(regex, i))
            and any(int(n) > _MAX_REPEAT for n in m.groups() if n)
        ):
            return "invalid repeat count"
        i += 1
    return None


def _python_form(regex: str) -> str:
    """RE2's `(?<name>...)` as Python spells it."""
    return _NAMED_GROUP.sub("(?P<", regex)


def _regex_problem(regex: str) -> str | None:
    problem = _re2_only_problem(regex)
    if problem is not None:
        return problem
    try:
        re.compile(_python_form(regex))
    except re.error as e:
        return next((d for start, d in _RE2_DESCRIPTIONS if e.msg.startswith(start)), e.msg)
    return None


@lru_cache(maxsize=1024)
def compile_regex(regex: str) -> re.Pattern[str] | None:
    if _regex_problem(regex) is not None:
        return None
    return re.compile(_python_form(regex))


def check_regex(regex: str) -> None:
    problem = _regex_problem(regex)
    if problem is not None:
        raise KafkaError(
            ErrorCode.invalid_regular_expression,
            f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {problem}.",
        )


# -- metadata hash ---------------------------------------------------------------------------

_I64 = struct.Struct(">q")


@lru_cache(maxsize=65536)
def _topic_digest(topic: TopicMetadata) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    h.update(topic.topic_id)
    name = topic.name.encode()
    h.update(len(name).to_bytes(4, "big") + name)
    h.update(topic.num_partitions.to_bytes(4, "big", signed=True))
    if topic.partition_racks is not None:
        for p, racks in enumerate(topic.partition_racks):
            for rack in sorted(racks):
                data = rack.encode()
                h.update(p.to_bytes(4, "big") + len(data).to_bytes(4, "big") + data)
    return h.digest()


def metadata_hash(names: Iterable[str], topics: Mapping[str, TopicMetadata]) -> int:
    """A 64-bit hash of the subscribed topics' metadata (id, name, partitions, racks): the
    group epoch is bumped when it changes (KIP-1101). 0 when no subscribed topic exists. Only
    compared with itself, so it need not be Kafka's value."""
    h = hashlib.blake2b(digest_size=8)
    found = False
    for name in sorted(names):
        topic = topics.get(name)
        if topic is not None:
            h.update(_topic_digest(topic))
            found = True
    return _int64(h.digest()) if found else 0


def names_version(names: Sequence[str]) -> int:
    h = hashlib.blake2b(digest_size=8)
    for name in names:
        data = name.encode()
        h.update(len(data).to_bytes(4, "big") + data)
    return _int64(h.digest())


def _int64(digest: bytes) -> int:
    """An 8-byte digest as a signed int64, as the versions are compared."""
    value: int = _I64.unpack(digest)[0]
    return value
