"""Kafka's ``sasl.jaas.config`` values: ``<LoginModule class> <flag> key="value" ...;``.

A broker reads only the options (PLAIN's ``user_<name>="<password>"``, OAUTHBEARER's
``unsecuredValidator*``); the login module class names which mechanism an entry is for, as in
Kafka, and is kept so a mismatch can be reported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_FLAGS = frozenset({"required", "requisite", "sufficient", "optional"})
_TOKEN = re.compile(
    r"""\s*(?:"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<eq>=)|(?P<end>;)|(?P<word>[^\s=;"]+))""", re.S
)
_ESCAPE = re.compile(r"\\(.)", re.S)


class JaasConfigError(ValueError):
    """A sasl.jaas.config value that does not parse."""


@dataclass(frozen=True, slots=True)
class LoginModule:
    class_name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def parse_jaas_config(text: str) -> list[LoginModule]:
    """The login modules of a JAAS configuration value (``;`` ends each)."""
    tokens = _tokens(text)
    modules: list[LoginModule] = []
    i = 0
    while i < len(tokens):
        kind, class_name = tokens[i]
        if kind != "word":
            raise JaasConfigError(f"expected a login module class name at token {i + 1}")
        if i + 1 >= len(tokens) or tokens[i + 1][1].lower() not in _FLAGS:
            raise JaasConfigError(
                f"login module {class_name} needs a control flag "
                f"({', '.join(sorted(_FLAGS))}) after its class name"
            )
        flag = tokens[i + 1][1].lower()
        i += 2
        options: dict[str, str] = {}
        while True:
            if i >= len(tokens):
                raise JaasConfigError(f"login module {class_name} is not terminated by ';'")
            kind, value = tokens[i]
            if kind == "end":
                i += 1
                break
            if (
                kind != "word"
                or i + 2 >= len(tokens)
                or tokens[i + 1][0] != "eq"
                or tokens[i + 2][0] not in ("word", "quoted")
            ):
                raise JaasConfigError(  # no values quoted: they may be passwords
                    f"login module {class_name}: expected key=value options (token {i + 1})"
                )
            options[value] = tokens[i + 2][1]
            i += 3
        modules.append(LoginModule(class_name, flag, options))
    return modules


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise JaasConfigError(f"cannot parse at character {pos + 1} (an unclosed quote?)")
        pos = m.end()
        if m.group("quoted") is not None:
            out.append(("quoted", _ESCAPE.sub(r"\1", m.group("quoted"))))
        elif m.group("eq"):
            out.append(("eq", "="))
        elif m.group("end"):
            out.append(("end", ";"))
        else:
            out.append(("word", m.group("word")))
    return out
