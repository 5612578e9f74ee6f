"""ssl.principal.mapping.rules with Kafka's SslPrincipalMapper semantics (cases from its tests)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import NameOID

from common import dev_ca
from dataplane.security.ssl_principal import NoMatchingRule, SslPrincipalMapper


@pytest.mark.parametrize(
    ("rules", "dn", "name"),
    [
        (
            "DEFAULT",
            "CN=Duke,OU=JavaSoft,O=Sun Microsystems,C=US",
            "CN=Duke,OU=JavaSoft,O=Sun Microsystems,C=US",
        ),
        (
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
            "CN=kafka-user,OU=ServiceUsers,O=Org,C=US",
            "kafka-user",
        ),
        (
            "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
            "CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Santa Clara,ST=CA,C=US",
            "duke@javasoft",
        ),
        (
            "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/U",
            "CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Santa Clara,ST=CA,C=US",
            "DUKE@JAVASOFT",
        ),
        # several rules: the first that matches wins; DEFAULT catches the rest
        (
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),.*$/$1@$2/L, DEFAULT",
            "CN=Duke,OU=JavaSoft,O=Sun,C=US",
            "duke@javasoft",
        ),
        ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT", "CN=x,OU=Other", "CN=x,OU=Other"),
        # a reference to a group the pattern lacks stays literal (Kafka's NiFi escaping)
        ("RULE:^CN=(.*?),OU=(.*?)$/$1@$3/", "CN=a,OU=b", "a@$3"),
        # slashes escaped in the pattern and the replacement
        (r"RULE:^CN=(.*?)\/x,OU=(.*)$/$2\/$1/", "CN=a/x,OU=b", "b/a"),
        # Java's $12 is group 1 and "2" when the pattern has fewer groups
        ("RULE:^CN=(.*?)$/$12/", "CN=a", "a2"),
        ("RULE:^CN=(.*?)$/\\$1/", "CN=a", "$1"),
    ],
)
def test_rules_map_names_as_kafka(rules: str, dn: str, name: str) -> None:
    assert SslPrincipalMapper(rules).name(dn) == name


def test_no_matching_rule_refuses() -> None:
    with pytest.raises(NoMatchingRule):
        SslPrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/").name("CN=x,OU=Other")


@pytest.mark.parametrize("rules", ["DEFAULT, garbage", "RULE:a/b/c/L", "RULE:^CN=(.*/$1/"])
def test_invalid_rules_are_refused(rules: str) -> None:
    with pytest.raises(ValueError, match=r"ssl\.principal\.mapping\.rules"):
        SslPrincipalMapper(rules)


def test_empty_rules_are_ignored() -> None:
    mapper = SslPrincipalMapper("RULE:^CN=(.*)$/$1/, ,DEFAULT")
    assert len(mapper.rules) == 2


def test_principal_of_a_certificate_is_its_subject_in_rfc2253_order(tmp_path: Path) -> None:
    pem = dev_ca.issue_certificate(
        tmp_path,
        "alice.pem",
        "alice",
        server=False,
        subject=[(NameOID.ORGANIZATIONAL_UNIT_NAME, "eng"), (NameOID.ORGANIZATION_NAME, "Acme")],
    )
    der = x509.load_pem_x509_certificates(pem.read_bytes())[0].public_bytes(Encoding.DER)
    assert SslPrincipalMapper("DEFAULT").principal(der) == "User:CN=alice,OU=eng,O=Acme"
    assert SslPrincipalMapper("RULE:^CN=([^,]*),.*$/$1/").principal(der) == "User:alice"
