package main

import (
	"context"
	"errors"
	"log"
	"os"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// franz is franz-go: kgo for producing, consuming, groups and transactions, kadm for admin.
type franz struct{}

// saramaLib is IBM Sarama.
type saramaLib struct{}

func brokers(o options) []string { return strings.Split(o.required("bootstrap"), ",") }

// logLevel is $RAFKA_CLIENT_LOG (default WARN).
func logLevel() string {
	if l := strings.ToUpper(os.Getenv("RAFKA_CLIENT_LOG")); l != "" {
		return l
	}
	return "WARN"
}

// franzClient: a kgo client of the bootstrap brokers, with $RAFKA_CLIENT_SECURITY and
// $RAFKA_CLIENT_LOG applied, plus the command's own options.
// Over SASL a refused login ends the command at once (kgo would retry it until the command's
// timeout): a Ping (one Metadata request) goes first.
func franzClient(o options, extra ...kgo.Opt) (*kgo.Client, error) {
	opts, err := franzClientOpts(o, extra...)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	if sec, _ := loadSecurity(); sec.sasl() {
		ctx, cancel := deadline(o, 60)
		defer cancel()
		if err := cl.Ping(ctx); err != nil && errors.Is(err, kerr.SaslAuthenticationFailed) {
			cl.Close()
			return nil, err
		}
	}
	return cl, nil
}

// franzClientOpts: franzClient's options (for kgo.NewGroupTransactSession).
func franzClientOpts(o options, extra ...kgo.Opt) ([]kgo.Opt, error) {
	sec, err := loadSecurity()
	if err != nil {
		return nil, err
	}
	secOpts, err := sec.franzOpts()
	if err != nil {
		return nil, err
	}
	level := map[string]kgo.LogLevel{
		"DEBUG": kgo.LogLevelDebug, "INFO": kgo.LogLevelInfo, "WARN": kgo.LogLevelWarn,
		"ERROR": kgo.LogLevelError,
	}[logLevel()]
	opts := []kgo.Opt{
		kgo.SeedBrokers(brokers(o)...),
		kgo.ClientID("rafka-franz-go"),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, level, nil)),
	}
	opts = append(opts, secOpts...)
	return append(opts, extra...), nil
}

// franzAdmin: a kadm client over a kgo client (close the kgo client when done).
func franzAdmin(o options) (*kadm.Client, *kgo.Client, error) {
	cl, err := franzClient(o)
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl, nil
}

// saramaConfig: Sarama's config with $RAFKA_CLIENT_SECURITY and $RAFKA_CLIENT_LOG applied.
// Sarama picks request versions by the configured broker version (not ApiVersions alone):
// the driver says Kafka 4.0, whose brokers dropped the oldest versions Sarama's default (2.8)
// may send.
func saramaConfig(o options) (*sarama.Config, error) {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V4_0_0_0
	cfg.ClientID = "rafka-sarama"
	timeout := o.timeout(60)
	cfg.Net.DialTimeout = min(timeout, 30*time.Second)
	cfg.Net.ReadTimeout = min(timeout, 30*time.Second)
	cfg.Net.WriteTimeout = min(timeout, 30*time.Second)
	cfg.Admin.Timeout = min(timeout, 30*time.Second)
	if l := logLevel(); l == "DEBUG" || l == "INFO" {
		sarama.Logger = log.New(os.Stderr, "[sarama] ", log.LstdFlags|log.Lmicroseconds)
		if l == "DEBUG" {
			sarama.DebugLogger = sarama.Logger
		}
	}
	sec, err := loadSecurity()
	if err != nil {
		return nil, err
	}
	return cfg, sec.applySarama(cfg)
}

// deadline: a context that ends after --timeout seconds (def when not given).
func deadline(o options, def float64) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), o.timeout(def))
}
