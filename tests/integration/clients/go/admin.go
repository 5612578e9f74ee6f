package main

import (
	"encoding/base64"
	"strconv"
	"strings"
)

// The admin actions (../README.md, "Admin") print Kafka's client-neutral shapes; these build
// them for both libraries.

// topicID: Kafka's Uuid.toString, URL-safe base64 without padding (null: no id).
func topicID(id [16]byte) any {
	if id == [16]byte{} {
		return nil
	}
	return base64.RawURLEncoding.EncodeToString(id[:])
}

func partitionLine(p, leader int32, replicas, isr []int32) map[string]any {
	var l any = leader
	if leader < 0 {
		l = nil
	}
	return map[string]any{"partition": p, "leader": l, "replicas": nonNil(replicas),
		"isr": nonNil(isr)}
}

func nonNil(xs []int32) []int32 {
	if xs == nil {
		return []int32{}
	}
	return xs
}

// configResource: --topic T | --broker ID ("" = the cluster-wide default) | --broker-logger ID
// (--group and --client-metrics: neither Go client has those resources).
func configResource(o options) (kind, name string) {
	for _, kind := range []string{"topic", "broker", "broker-logger"} {
		if o.has(kind) {
			return kind, o.str(kind, "")
		}
	}
	if o.has("group") || o.has("client-metrics") {
		panic(unsupported("no GROUP or CLIENT_METRICS config resources"))
	}
	panic(badUsage("admin: needs --topic, --broker or --broker-logger"))
}

// Kafka's names of DescribeConfigs' config sources and types (their protocol numbers).
var configSources = []string{"UNKNOWN", "DYNAMIC_TOPIC_CONFIG", "DYNAMIC_BROKER_CONFIG",
	"DYNAMIC_DEFAULT_BROKER_CONFIG", "STATIC_BROKER_CONFIG", "DEFAULT_CONFIG",
	"DYNAMIC_BROKER_LOGGER_CONFIG", "CLIENT_METRICS_CONFIG", "GROUP_CONFIG"}

var configTypes = []string{"UNKNOWN", "BOOLEAN", "STRING", "INT", "SHORT", "LONG", "DOUBLE",
	"LIST", "CLASS", "PASSWORD"}

func enumName(names []string, n int) string {
	if n >= 0 && n < len(names) {
		return names[n]
	}
	return "UNKNOWN"
}

// configLine: one config of describe-configs. readOnly, type and documentation are nil where
// the client does not tell them (kadm).
func configLine(value *string, source int, readOnly any, sensitive bool, synonyms [][]any,
	kind any, doc *string) map[string]any {
	var v, d any
	if value != nil && !sensitive {
		v = *value
	}
	if doc != nil {
		d = *doc
	}
	if synonyms == nil {
		synonyms = [][]any{}
	}
	return map[string]any{"value": v, "source": enumName(configSources, source),
		"read_only": readOnly, "sensitive": sensitive, "synonyms": synonyms, "type": kind,
		"documentation": d}
}

// alterations: --set k=v, --delete k, --append k=v, --subtract k=v, in that order.
type alteration struct {
	op          string // set, delete, append, subtract
	name, value string
}

func alterations(o options) []alteration {
	var out []alteration
	for _, op := range []string{"set", "delete", "append", "subtract"} {
		for _, spec := range o.list(op) {
			if op == "delete" {
				out = append(out, alteration{op, spec, ""})
				continue
			}
			k, v, ok := strings.Cut(spec, "=")
			if !ok {
				panic(badUsage("admin: expected k=v, got %s", spec))
			}
			out = append(out, alteration{op, k, v})
		}
	}
	if o.flag("legacy") {
		for _, a := range out {
			if a.op != "set" {
				panic(badUsage("admin alter-configs --legacy true takes --set only"))
			}
		}
	}
	return out
}

// assignments: --assignments "1,2;2,3", the replicas of each new partition.
func assignments(o options) ([][]int32, error) {
	if !o.has("assignments") {
		return nil, nil
	}
	var out [][]int32
	for _, part := range strings.Split(o.str("assignments", ""), ";") {
		ids, err := int32List(part)
		if err != nil {
			return nil, err
		}
		out = append(out, ids)
	}
	return out, nil
}

func brokerID(name string) (int32, error) {
	n, err := strconv.ParseInt(name, 10, 32)
	if err != nil {
		return 0, badUsage("bad broker id %q", name)
	}
	return int32(n), nil
}

func adminResult(kind, name string, err error) map[string]any {
	return map[string]any{"resource": kind, "name": name, "error": nullable(errorName(err))}
}

func splitTopics(spec string) []string {
	var out []string
	for _, t := range strings.Split(spec, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// groupListLine: list-groups' entry; type is the group's (classic, consumer, share), null where
// the client does not tell it.
func groupListLine(group, state, kind, protocolType string) map[string]any {
	return map[string]any{"group": group, "state": nullable(state), "type": nullable(kind),
		"protocol_type": protocolType}
}
