"""Delegation tokens: created, renewed, expired and described as the writer and the reader, and
a connection logged in with a token (which may not manage tokens)."""

from __future__ import annotations

import base64
import datetime
from functools import partial

from kio.schema.errors import ErrorCode

from cluster.client_security import ClientSecurity
from cluster.polling import wait_for
from dataplane.protocol.message_codec import Field, Message, Struct
from tests.compat.pair import Side
from tests.compat.security.support import (
    CREATE_TOKEN,
    DESCRIBE_TOKEN,
    EXPIRE_TOKEN,
    PROTOCOL,
    RENEW_TOKEN,
    Principals,
    call_decoded,
    logs_in,
)


def _response(name: str, valid: tuple[int, int], *fields: Field) -> Message:
    """A flexible (v2+) response of plain fields, decoded to a dict."""
    return Message(name, valid, (2, 0x7FFF), Struct(dict, fields, keeps_tags=True))


_EXPIRY = (Field("error_code", "int16"), Field("expiry_timestamp_ms", "int64"))
_THROTTLE = Field("throttle_time_ms", "int32")
CREATE_TOKEN_RESPONSE = _response(
    "CreateDelegationTokenResponse",
    (3, 3),
    Field("error_code", "int16"),
    *(
        Field(name, "string")
        for name in (
            "principal_type",
            "principal_name",
            "token_requester_principal_type",
            "token_requester_principal_name",
        )
    ),
    *(Field(name, "int64") for name in ("issue_ms", "expiry_ms", "max_ms")),
    Field("token_id", "string"),
    Field("hmac", "bytes"),
    _THROTTLE,
)
EXPIRY_RESPONSE = _response("RenewOrExpireDelegationTokenResponse", (2, 2), *_EXPIRY, _THROTTLE)
TOKEN_MASKED = ["issue_ms", "expiry_ms", "max_ms", "token_id", "hmac"]


def test_delegation_tokens(users: Principals) -> None:
    call_decoded(
        users.writer,
        "CreateDelegationToken as writer for itself",
        CREATE_TOKEN_RESPONSE,
        CREATE_TOKEN,
        3,
        masked=TOKEN_MASKED,
        owner_principal_type=None,
        owner_principal_name=None,
        renewers=(),
        max_lifetime=datetime.timedelta(hours=1),
    )
    call_decoded(
        users.writer,
        "CreateDelegationToken as writer for another user (no CREATE_TOKENS)",
        CREATE_TOKEN_RESPONSE,
        CREATE_TOKEN,
        3,
        masked=TOKEN_MASKED,
        owner_principal_type="User",
        owner_principal_name="reader",
        renewers=(),
        max_lifetime=datetime.timedelta(hours=1),
    )
    users.reader.call(
        "DescribeDelegationToken as reader: another user's tokens are not listed",
        DESCRIBE_TOKEN,
        3,
        owners=None,
    )
    call_decoded(
        users.writer,
        "RenewDelegationToken as writer: an unknown HMAC",
        EXPIRY_RESPONSE,
        RENEW_TOKEN,
        2,
        hmac=b"not-a-token",
        renew_period=datetime.timedelta(hours=1),
    )
    call_decoded(
        users.writer,
        "ExpireDelegationToken as writer: an unknown HMAC",
        EXPIRY_RESPONSE,
        EXPIRE_TOKEN,
        2,
        hmac=b"not-a-token",
        expiry_time_period=datetime.timedelta(hours=1),
    )

    def listed(side: Side) -> bool:  # a new token reaches Kafka's broker through its metadata
        return bool(side.conn().call(DESCRIBE_TOKEN, 3, owners=None).tokens)

    wait_for(lambda: all(users.writer.both(listed)), 30, "the writer's token on both")
    users.writer.call(
        "DescribeDelegationToken as writer: its own token",
        DESCRIBE_TOKEN,
        3,
        masked=[
            f"tokens.*.{k}"
            for k in ("issue_timestamp", "expiry_timestamp", "max_timestamp", "token_id", "hmac")
        ],
        owners=None,
    )


def test_token_authenticated_connection(users: Principals) -> None:
    """A connection that logged in with a delegation token (SCRAM, tokenauth=true) may not
    manage tokens (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)."""
    pair = users.pair("writer")
    for side in pair.sides:
        created = side.conn().call(
            CREATE_TOKEN,
            3,
            owner_principal_type=None,
            owner_principal_name=None,
            renewers=(),
            max_lifetime=datetime.timedelta(hours=1),
        )
        assert created.error_code == ErrorCode.none, created
        side.reset()
        side.security = ClientSecurity(
            PROTOCOL,
            "SCRAM-SHA-256",
            created.token_id,
            base64.b64encode(created.hmac).decode(),
            tokenauth=True,
        )
        wait_for(partial(logs_in, side.security, side), 30, f"{side.name} taking the token")
    call_decoded(
        pair,
        "CreateDelegationToken on a token-authenticated connection",
        CREATE_TOKEN_RESPONSE,
        CREATE_TOKEN,
        3,
        owner_principal_type=None,
        owner_principal_name=None,
        renewers=(),
        max_lifetime=datetime.timedelta(hours=1),
    )
    call_decoded(
        pair,
        "RenewDelegationToken on a token-authenticated connection",
        EXPIRY_RESPONSE,
        RENEW_TOKEN,
        2,
        hmac=b"whatever",
        renew_period=datetime.timedelta(hours=1),
    )
    pair.close()
