"""Subscribed regexes are refused as Kafka refuses them (RE2/J's syntax and descriptions):
each case's description is what Apache Kafka 4.4 answered in ConsumerGroupHeartbeat."""

from __future__ import annotations

import pytest

from dataplane.coordinator.subscriptions import check_regex, compile_regex
from dataplane.protocol.errors import ErrorCode, KafkaError

KAFKA_4_4 = {
    "[": "missing closing ]",
    "[a": "missing closing ]",
    "(": "missing closing )",
    ")": "regexp/syntax: internal error",
    "*": "missing argument to repetition operator",
    "+a": "missing argument to repetition operator",
    "a**": "invalid nested repetition operator",
    "a+*": "invalid nested repetition operator",
    "x{2}{3}": "invalid nested repetition operator",
    "\\": "trailing backslash at end of expression",
    "\\q": "invalid escape sequence",
    "\\Z": "invalid escape sequence",
    "(a)\\1": "invalid escape sequence",
    "[z-a]": "invalid character class range",
    "a{3,1}": "invalid repeat count",
    "a{1001}": "invalid repeat count",
    "a{2,1001}": "invalid repeat count",
    "(?<x": "invalid named capture",
    "(?=a)": "invalid or unsupported Perl syntax",
    "(?P<n>a)(?P=n)": "invalid or unsupported Perl syntax",
    "(?#c)": "invalid or unsupported Perl syntax",
}
VALID = ["compat-.*", "(?P<n>a)", "(?<n>a)", "(?i)a", "a*?", "[]a]", "[^]a]", "[\\]]", "\\d{1000}"]


@pytest.mark.parametrize(("regex", "description"), KAFKA_4_4.items())
def test_invalid_regexes_are_described_as_kafka_does(regex: str, description: str) -> None:
    with pytest.raises(KafkaError) as e:
        check_regex(regex)
    assert e.value.code == ErrorCode.invalid_regular_expression
    assert e.value.message == (
        f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {description}."
    )
    assert compile_regex(regex) is None


@pytest.mark.parametrize("regex", VALID)
def test_valid_regexes_compile(regex: str) -> None:
    check_regex(regex)
    assert compile_regex(regex) is not None


def test_a_named_group_in_re2_syntax_matches() -> None:
    pattern = compile_regex("(?<kind>orders|payments)-.*")
    assert pattern is not None
    assert pattern.fullmatch("orders-eu")
