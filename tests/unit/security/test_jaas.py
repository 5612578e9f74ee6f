"""Kafka's sasl.jaas.config syntax."""

from __future__ import annotations

import pytest

from dataplane.security.sasl.jaas import JaasConfigError, LoginModule, parse_jaas_config

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def test_plain_users() -> None:
    text = (
        f'{PLAIN} required username="admin" password="admin-secret" '
        'user_admin="admin-secret" user_alice="alice-secret";'
    )
    assert parse_jaas_config(text) == [
        LoginModule(
            PLAIN,
            "required",
            {
                "username": "admin",
                "password": "admin-secret",
                "user_admin": "admin-secret",
                "user_alice": "alice-secret",
            },
        )
    ]


def test_unquoted_values_escapes_whitespace_and_several_modules() -> None:
    text = (
        f'  {PLAIN}  REQUIRED\n  user_bob=b0b  user_q="a \\"quoted\\" ; value";\n'
        "other.Module optional;"
    )
    first, second = parse_jaas_config(text)
    assert first.flag == "required"
    assert first.options == {"user_bob": "b0b", "user_q": 'a "quoted" ; value'}
    assert second == LoginModule("other.Module", "optional", {})


def test_empty() -> None:
    assert parse_jaas_config("") == []
    assert parse_jaas_config("   ") == []


@pytest.mark.parametrize(
    "text",
    [
        f'{PLAIN} user_a="secret-value";',  # no flag
        f'{PLAIN} required user_a="secret-value"',  # no ';'
        f'{PLAIN} required user_a="secret-value;',  # unclosed quote
        f"{PLAIN} required secret-value;",  # no key=
        f"{PLAIN} required user_a=;",
        '="secret-value";',
    ],
)
def test_errors_never_quote_values(text: str) -> None:
    with pytest.raises(JaasConfigError) as e:
        parse_jaas_config(text)
    assert "secret-value" not in str(e.value)
