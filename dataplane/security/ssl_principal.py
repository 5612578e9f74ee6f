"""The principal of a TLS client certificate: ``ssl.principal.mapping.rules`` over its subject.

Kafka's SslPrincipalMapper: a comma-separated list of ``RULE:pattern/replacement/[LU]`` and
``DEFAULT``; the first rule whose (Java) regex matches the whole distinguished name gives the
name, ``DEFAULT`` gives the DN itself, and no matching rule fails the authentication. The DN is
in RFC 2253 form (``CN=alice,OU=eng,O=Acme``), most specific attribute first, as Java prints it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cryptography import x509

# Kafka's RULE_PATTERN and RULE_SPLITTER, unchanged.
_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_PARSER = re.compile(_RULE)


class NoMatchingRule(ValueError):
    """No rule maps this distinguished name: the client is refused."""


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""  # in Python's re.sub syntax
    case: str = ""  # "L", "U" or ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        name = self.pattern.sub(self.replacement, dn)
        return name.lower() if self.case == "L" else name.upper() if self.case == "U" else name


class SslPrincipalMapper:
    def __init__(self, rules: str) -> None:
        self.rules = [r for r in map(_parse_rule, _split(rules or "DEFAULT")) if r is not None]
        self._text = rules

    def name(self, dn: str) -> str:
        """The principal name (without ``User:``) for a distinguished name."""
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise NoMatchingRule(f"no ssl.principal.mapping.rules rule applies to {dn!r}")

    def principal(self, certificate_der: bytes) -> str:
        """``User:<mapped subject>`` of a DER client certificate."""
        subject = x509.load_der_x509_certificate(certificate_der).subject
        return f"User:{self.name(subject.rfc4514_string())}"

    def __repr__(self) -> str:
        return f"SslPrincipalMapper({self._text!r})"


def _split(rules: str) -> list[str]:
    return [m.group(1) for m in _SPLITTER.finditer(rules.strip())]


def _parse_rule(rule: str) -> _Rule | None:
    m = _PARSER.match(rule)
    if m is None or m.end() != len(rule):
        unmatched = rule[m.end() :] if m else rule
        raise ValueError(
            f"ssl.principal.mapping.rules: invalid rule {rule!r} (unmatched {unmatched!r}); "
            "expected RULE:pattern/replacement/[LU] or DEFAULT"
        )
    if m.group(1) is not None:
        return _Rule(None)
    if m.group(2) is None:
        return None  # an empty rule is ignored, as Kafka does
    try:
        pattern = re.compile(m.group(2))
    except re.error as e:
        raise ValueError(f"ssl.principal.mapping.rules: bad pattern in {rule!r}: {e}") from e
    return _Rule(pattern, _java_replacement(m.group(4), pattern.groups), m.group(6))


def _java_replacement(text: str, groups: int) -> str:
    """A java.util.regex replacement (``$1``, ``\\$``) as a Python one. As Kafka (after NiFi),
    a reference to a group the pattern lacks is kept as literal text; Java reads the longest
    group number that exists (``$12`` is group 1 then "2" when there are fewer than 12)."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            out.append(_escape(text[i + 1]))
            i += 2
        elif c == "$" and i + 1 < len(text) and text[i + 1].isdigit():
            ref, j = int(text[i + 1]), i + 2
            while j < len(text) and text[j].isdigit() and ref * 10 + int(text[j]) <= groups:
                ref, j = ref * 10 + int(text[j]), j + 1
            if ref > groups:
                out.append("$")
                i += 1
            else:
                out.append(f"\\g<{ref}>")
                i = j
        else:
            out.append(_escape(c))
            i += 1
    return "".join(out)


def _escape(c: str) -> str:
    return "\\\\" if c == "\\" else c
