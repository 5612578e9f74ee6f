"""SASL authentication of Kafka connections: PLAIN, SCRAM-SHA-256/512 (also with delegation
tokens) and OAUTHBEARER, per listener (see authenticator.py)."""

from dataplane.security.sasl.authenticator import AuthResult, SaslAuthenticator, SaslConfigError
from dataplane.security.sasl.session import SaslSession, SaslState

__all__ = ["AuthResult", "SaslAuthenticator", "SaslConfigError", "SaslSession", "SaslState"]
