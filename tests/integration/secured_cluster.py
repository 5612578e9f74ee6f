"""A secured local cluster for the security tests, and the credentials of its principals.

`secured_cluster()` starts brokers whose client listener is SASL_SSL (or what is asked) with
every mechanism on: PLAIN users in the listener's JAAS config, SCRAM credentials stored through
AlterUserScramCredentials, OAUTHBEARER tokens signed by a test key whose JWKS the brokers read
from a file, delegation tokens, and the StandardAuthorizer with `User:admin` as super user.
`SecuredCluster.env()` gives a driver's $RAFKA_CLIENT_SECURITY for a principal and mechanism,
`SecuredCluster.security()` the same as a `ClientSecurity` for the protocol-level helpers.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from cluster import admin
from cluster.client_security import ClientSecurity
from cluster.kafka_client import AuthenticationError, KafkaConnection
from cluster.local import LocalCluster, free_base_port
from cluster.polling import wait_for
from common import dev_ca
from meta.acl import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from tests.integration.clients.drivers import security_env

MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
SCRAM = ["SCRAM-SHA-256", "SCRAM-SHA-512"]
PASSWORDS = {
    "admin": "admin-secret",
    "writer": "writer-secret",
    "reader": "reader-secret",
    "revoked": "revoked-secret",
}
AUDIENCE, ISSUER, KEY_ID = "rafka", "rafka-tests", "test-key"
SUPER_USER = "User:admin"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


@dataclass
class SecuredCluster:
    cluster: LocalCluster
    signing_key: rsa.RSAPrivateKey
    protocol: str
    admin_certificate: str = ""  # SSL: the super user's client certificate (key + chain)

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    @property
    def ca(self) -> str:
        """The CA clients trust ("" without TLS)."""
        return str(self.cluster.ca_path or "")

    def jwt(self, subject: str, lifetime_s: int = 600, key: rsa.RSAPrivateKey | None = None) -> str:
        """A JWT for `subject` as the brokers expect it (audience, issuer, key id); a negative
        lifetime gives an expired one, another `key` one the brokers cannot verify."""
        now = int(time.time())
        claims = {"sub": subject, "aud": AUDIENCE, "iss": ISSUER, "iat": now - 5}
        claims["exp"] = now + lifetime_s
        return jwt.encode(
            claims, key or self.signing_key, algorithm="RS256", headers={"kid": KEY_ID}
        )

    def credentials(self, user: str, mechanism: str, password: str | None = None) -> dict:
        if mechanism == "OAUTHBEARER":
            return {"mechanism": mechanism, "token": self.jwt(user)}
        return {
            "mechanism": mechanism,
            "username": user,
            "password": PASSWORDS.get(user, "") if password is None else password,
        }

    def env(self, user: str, mechanism: str, **settings: object) -> dict[str, str]:
        """$RAFKA_CLIENT_SECURITY of `user` authenticating with `mechanism`; `settings`
        replace or add keys (password=..., token=..., tokenauth=True)."""
        values = self.credentials(user, mechanism) | {"ca": self.ca} | settings
        return security_env(self.protocol, **values)

    def security(self, user: str, mechanism: str, **fields: object) -> ClientSecurity:
        creds = self.credentials(user, mechanism)
        return ClientSecurity(
            self.protocol,
            mechanism,
            creds.get("username", ""),
            creds.get("password", ""),
            token=creds.get("token", ""),
            ca_file=self.ca,
            **fields,  # type: ignore[arg-type]
        )

    @property
    def admin(self) -> admin.Brokers:
        """The super user's view (PLAIN, or its client certificate on an SSL listener)."""
        if self.admin_certificate:
            security = ClientSecurity("SSL", ca_file=self.ca, cert_file=self.admin_certificate)
        else:
            security = self.security("admin", "PLAIN")
        return admin.Brokers(self.bootstrap, security)

    def create_topic(self, name: str, partitions: int = 2) -> None:
        admin.create_topic(self.admin, name, partitions, -1, {})

    def allow(
        self,
        principal: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        pattern: PatternType = PatternType.LITERAL,
    ) -> AclBinding:
        binding = AclBinding(
            resource_type, name, pattern, principal, "*", operation, AclPermissionType.ALLOW
        )
        (error,) = admin.create_acls(self.admin, [binding])
        assert error is None, error
        return binding


def jwks(key: rsa.RSAPrivateKey) -> dict:
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    return {"keys": [public | {"kid": KEY_ID, "alg": "RS256", "use": "sig"}]}


def authenticates(address: str, security: ClientSecurity) -> bool:
    """Whether `security`'s credentials get a connection to `address` authenticated."""
    try:
        with KafkaConnection.to_any(address, 5, security):
            return True
    except AuthenticationError:
        return False


@contextmanager
def secured_cluster(
    tmp: Path,
    protocol: str = "SASL_SSL",
    brokers: int = 2,
    overrides: dict[str, str] | None = None,
    base_port: int | None = None,
) -> Iterator[SecuredCluster]:
    """A running cluster with every mechanism on `protocol`'s listener (module fixtures);
    SCRAM users are created for every principal of PASSWORDS. On an SSL listener the super
    user is the client certificate CN=admin (`ssl.principal.mapping.rules` must map it to
    User:admin). `base_port`: the LocalCluster port layout's base (for `listeners` overrides
    that add listeners beside the protocol's), else a free one."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (tmp / "jwks.json").write_text(json.dumps(jwks(key)))
    listener = protocol.lower()
    users = " ".join(f'user_{u}="{p}"' for u, p in PASSWORDS.items())
    settings = {
        "sasl.enabled.mechanisms": ",".join(MECHANISMS),
        f"listener.name.{listener}.plain.sasl.jaas.config": f"{PLAIN_MODULE} required {users};",
        "sasl.oauthbearer.jwks.endpoint.url": (tmp / "jwks.json").as_uri(),
        "sasl.oauthbearer.expected.audience": AUDIENCE,
        "sasl.oauthbearer.expected.issuer": ISSUER,
        "delegation.token.secret.key": "delegation-token-test-secret",
        "authorizer.class.name": AUTHORIZER,
        "super.users": SUPER_USER,
    } | (overrides or {})
    cluster = LocalCluster(
        brokers,
        1,
        tmp / "cluster",
        base_port or free_base_port(brokers, 1),
        settings,
        log_level="INFO",
        security_protocol=protocol,
    )
    try:
        cluster.start()
        secured = SecuredCluster(cluster, key, protocol)
        if protocol == "SSL":
            assert cluster.ca_path is not None
            path = dev_ca.issue_certificate(
                cluster.ca_path.parent, "admin.pem", "admin", server=False
            )
            secured.admin_certificate = str(path)
        if protocol.startswith("SASL_"):
            upserts = [(u, m, p, 4096) for u, p in PASSWORDS.items() for m in SCRAM]
            results = admin.alter_users(secured.admin, upserts, [])
            assert not any(results.values()), results
            writer = secured.security("writer", SCRAM[1])
            for address in cluster.bootstrap.split(","):  # on every broker
                wait_for(partial(authenticates, address, writer), 10, f"SCRAM on {address}")
        yield secured
    finally:
        cluster.stop()
