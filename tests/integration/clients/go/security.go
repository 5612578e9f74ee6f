package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// security is $RAFKA_CLIENT_SECURITY (../README.md, "Security"): absent or empty, PLAINTEXT.
type security struct {
	Protocol  string `json:"protocol"`
	Mechanism string `json:"mechanism"`
	Username  string `json:"username"`
	Password  string `json:"password"`
	TokenAuth bool   `json:"tokenauth"`
	Token     string `json:"token"`
	CA        string `json:"ca"`
	Cert      string `json:"cert"`
	Key       string `json:"key"`
}

func loadSecurity() (security, error) {
	s := security{Protocol: "PLAINTEXT"}
	raw := strings.TrimSpace(os.Getenv("RAFKA_CLIENT_SECURITY"))
	if raw == "" {
		return s, nil
	}
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return s, fmt.Errorf("RAFKA_CLIENT_SECURITY: %w", err)
	}
	return s, nil
}

func (s security) tls() bool  { return strings.HasSuffix(s.Protocol, "SSL") }
func (s security) sasl() bool { return strings.HasPrefix(s.Protocol, "SASL_") }

// tlsConfig trusts the CA file and presents the client certificate, if given.
func (s security) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.CA != "" {
		pem, err := os.ReadFile(s.CA)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("no certificate in %s", s.CA)
		}
	}
	if s.Cert != "" {
		pair, err := tls.LoadX509KeyPair(s.Cert, s.Key)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// mechanism is franz-go's SASL mechanism of the settings (Sarama borrows its SCRAM).
func (s security) mechanism() (sasl.Mechanism, error) {
	switch s.Mechanism {
	case "PLAIN":
		return plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: s.Username, Pass: s.Password, IsToken: s.TokenAuth}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: s.Username, Pass: s.Password, IsToken: s.TokenAuth}.AsSha512Mechanism(), nil
	case "OAUTHBEARER": // the JWT as given: the broker judges it, expired or not
		return oauth.Auth{Token: s.Token}.AsMechanism(), nil
	}
	return nil, badUsage("RAFKA_CLIENT_SECURITY: unknown mechanism %q", s.Mechanism)
}

// franzOpts: the settings as kgo options.
func (s security) franzOpts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if s.tls() {
		cfg, err := s.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if s.sasl() {
		m, err := s.mechanism()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// applySarama: the settings on a Sarama config. Sarama has no SCRAM client of its own (its
// docs point to a third-party one): franz-go's SCRAM mechanism serves through scramAdapter.
func (s security) applySarama(cfg *sarama.Config) error {
	if s.tls() {
		tc, err := s.tlsConfig()
		if err != nil {
			return err
		}
		cfg.Net.TLS.Enable, cfg.Net.TLS.Config = true, tc
	}
	if !s.sasl() {
		return nil
	}
	cfg.Net.SASL.Enable = true
	cfg.Net.SASL.User, cfg.Net.SASL.Password = s.Username, s.Password
	switch s.Mechanism {
	case "PLAIN":
		cfg.Net.SASL.Mechanism = sarama.SASLTypePlaintext
	case "SCRAM-SHA-256", "SCRAM-SHA-512":
		if s.TokenAuth {
			return unsupported("Sarama has no delegation-token SCRAM (tokenauth)")
		}
		cfg.Net.SASL.Mechanism = sarama.SASLMechanism(s.Mechanism)
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient {
			return &scramAdapter{security: s}
		}
	case "OAUTHBEARER":
		cfg.Net.SASL.Mechanism = sarama.SASLTypeOAuth
		cfg.Net.SASL.TokenProvider = staticToken(s.Token)
	default:
		return badUsage("RAFKA_CLIENT_SECURITY: unknown mechanism %q", s.Mechanism)
	}
	return nil
}

// staticToken hands Sarama the JWT as is.
type staticToken string

func (t staticToken) Token() (*sarama.AccessToken, error) {
	return &sarama.AccessToken{Token: string(t)}, nil
}

// scramAdapter is Sarama's SCRAMClient over franz-go's SCRAM session.
type scramAdapter struct {
	security security
	session  sasl.Session
	done     bool
}

func (a *scramAdapter) Begin(_, _, _ string) error { return nil }

func (a *scramAdapter) Step(challenge string) (string, error) {
	if a.session == nil {
		m, err := a.security.mechanism()
		if err != nil {
			return "", err
		}
		session, first, err := m.Authenticate(context.Background(), "")
		a.session = session
		return string(first), err
	}
	done, msg, err := a.session.Challenge([]byte(challenge))
	a.done = done
	return string(msg), err
}

func (a *scramAdapter) Done() bool { return a.done }
