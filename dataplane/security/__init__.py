"""Who a client is (listeners, TLS, SASL) and what it may do (the authorizer)."""
