"""Client-side security settings and SASL mechanisms (cluster/client_security.py): Kafka's
client properties and JAAS syntax, and SCRAM against RFC 7677's worked example."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from cluster.client_security import (
    ClientSecurity,
    OAuthBearerClient,
    SaslFailed,
    ScramClient,
    SecurityConfigError,
    parse_jaas,
)

SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)


def rfc7677_client() -> ScramClient:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil")
    client.client_nonce = "rOprNGfwEbeRWgbNEkqO"
    client.client_first_bare = "n=user,r=rOprNGfwEbeRWgbNEkqO"
    return client


def test_scram_sha_256_matches_rfc7677() -> None:
    client = rfc7677_client()
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert client.respond(SERVER_FIRST) == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert client.respond(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=") is None


def test_scram_refuses_a_server_that_cannot_prove_the_key() -> None:
    client = rfc7677_client()
    client.respond(SERVER_FIRST)
    with pytest.raises(SaslFailed, match="signature"):
        client.respond(b"v=" + base64.b64encode(b"\0" * 32))


def test_scram_refuses_a_nonce_that_is_not_ours() -> None:
    with pytest.raises(SaslFailed, match="nonce"):
        rfc7677_client().respond(b"r=someone-else,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")


def test_scram_delegation_token_extension_and_name_escaping() -> None:
    client = ScramClient("SCRAM-SHA-512", "a=b,c", "hmac", tokenauth=True)
    first = client.first().decode()
    assert first.startswith("n,,n=a=3Db=2Cc,r=")
    assert first.endswith(",tokenauth=true")


def test_oauthbearer_answers_an_error_challenge_with_kvsep() -> None:
    client = OAuthBearerClient("h.p.s")
    assert client.first() == b"n,,\x01auth=Bearer h.p.s\x01\x01"
    assert client.respond(b"") is None
    assert client.respond(json.dumps({"status": "invalid_token"}).encode()) == b"\x01"


def test_jaas_options_quoted_and_bare() -> None:
    module, options = parse_jaas(
        "org.apache.kafka.common.security.scram.ScramLoginModule required\n"
        '  username="al ice" password="p\\"w;d" tokenauth=true;'
    )
    assert module.endswith("ScramLoginModule")
    assert options == {"username": "al ice", "password": 'p"w;d', "tokenauth": "true"}


def test_jaas_without_control_flag_is_refused() -> None:
    with pytest.raises(SecurityConfigError, match="required"):
        parse_jaas('PlainLoginModule username="a";')


def test_properties_sasl_ssl_scram(tmp_path: Path) -> None:
    sec = ClientSecurity.from_properties(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
            'required username="bob" password="pw";',
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": "ca.pem",
        },
        tmp_path,
    )
    assert (sec.tls, sec.sasl, sec.mechanism, sec.username, sec.password) == (
        True,
        True,
        "SCRAM-SHA-512",
        "bob",
        "pw",
    )
    assert sec.ca_file == str(tmp_path / "ca.pem")


def test_properties_oauthbearer_token_file_and_unsecured(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("a.b.c\n")
    base = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER"}
    jaas = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required"
    from_file = ClientSecurity.from_properties(
        base
        | {
            "sasl.jaas.config": jaas + ";",
            "sasl.oauthbearer.token.endpoint.url": f"file://{tmp_path / 'token'}",
        }
    )
    assert from_file.token == "a.b.c"
    unsecured = ClientSecurity.from_properties(
        base | {"sasl.jaas.config": jaas + ' unsecuredLoginStringClaim_sub="alice";'}
    )
    claims = unsecured.token.split(".")[1]
    assert json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))["sub"] == "alice"


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, "sasl.jaas.config"),
        ({"security.protocol": "SASL_SSL"}, "unset: GSSAPI"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"}, "GSSAPI"),
        ({"security.protocol": "TLS"}, "security.protocol"),
        (
            {
                "security.protocol": "SSL",
                "ssl.truststore.type": "JKS",
                "ssl.truststore.location": "x.jks",
            },
            "PEM",
        ),
        (
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": 'x.PlainLoginModule required username="a";',
            },
            "password",
        ),
    ],
)
def test_unusable_settings_say_which(props: dict[str, str], message: str) -> None:
    with pytest.raises(SecurityConfigError, match=message):
        ClientSecurity.from_properties(props)


def test_inline_pem_from_properties_loads(tmp_path: Path) -> None:
    """ssl.keystore.certificate.chain / ssl.keystore.key / ssl.truststore.certificates inline:
    a .properties file joins the continued lines, the PEM line breaks are gone."""
    from common import dev_ca

    ca = dev_ca.ensure_ca(tmp_path).read_text()
    keystore = dev_ca.issue_certificate(tmp_path, "c.pem", "client", server=False).read_text()
    key_end = keystore.index("-----END PRIVATE KEY-----") + len("-----END PRIVATE KEY-----")
    sec = ClientSecurity.from_properties(
        {
            "security.protocol": "SSL",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.certificates": ca.replace("\n", " "),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.certificate.chain": keystore[key_end:].replace("\n", " "),
            "ssl.keystore.key": keystore[:key_end].replace("\n", " "),
        }
    )
    assert sec.ca_pem.startswith("-----BEGIN CERTIFICATE-----\n")
    sec.ssl_context()  # loads the CA, the chain and the key
