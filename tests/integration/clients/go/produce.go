package main

import "time"

// produceSettings are produce's options, checked once for both libraries.
type produceSettings struct {
	count       int
	compression string // none, gzip, snappy, lz4, zstd
	acks        string // -1, 0, 1
	idempotence string // "" (the client's default), true, false
	startTs     int64
	timeout     time.Duration
}

func produceOptions(o options) produceSettings {
	s := produceSettings{
		count:       o.int("count", -1),
		compression: o.oneOf("compression", "none", "gzip", "snappy", "lz4", "zstd"),
		acks:        o.oneOf("acks", "-1", "0", "1"),
		startTs:     o.int64("start-ts", time.Now().UnixMilli()),
		timeout:     o.timeout(60),
	}
	if o.has("idempotence") {
		s.idempotence = o.oneOf("idempotence", "true", "false")
	}
	if s.count < 0 {
		panic(badUsage("missing --count"))
	}
	if s.idempotence == "true" && s.acks != "-1" {
		panic(badUsage("--idempotence true needs --acks -1"))
	}
	return s
}

// producedLine is produce's line for an acknowledged record (offset -1 under acks 0).
func producedLine(key []byte, partition int32, offset int64, timestamp int64) map[string]any {
	return map[string]any{"key": string(key), "partition": partition, "offset": offset,
		"timestamp": timestamp}
}

// consumeSettings are consume's options.
type consumeSettings struct {
	expect    int
	timeout   time.Duration
	committed bool // --isolation-level read_committed (given)
	isolation string
}

func consumeOptions(o options) consumeSettings {
	s := consumeSettings{expect: o.int("expect", -1), timeout: o.timeout(30)}
	if o.has("isolation-level") {
		s.isolation = o.oneOf("isolation-level", "read_uncommitted", "read_committed")
		s.committed = s.isolation == "read_committed"
	}
	if s.expect < 0 {
		panic(badUsage("missing --expect"))
	}
	return s
}
