package main

import (
	"bufio"
	"os"
	"strings"
	"time"
)

// txnEnds: --end commit|abort[,...], how each transaction ends, cycled.
func txnEnds(o options) []string {
	ends := strings.Split(o.str("end", "commit"), ",")
	for _, e := range ends {
		if e != "commit" && e != "abort" {
			panic(badUsage("bad --end %s", o.str("end", "")))
		}
	}
	return ends
}

// hold: --hold true makes a transaction wait for a line on stdin before it ends (stdin's end
// releases every hold).
type hold struct {
	on bool
	in *bufio.Scanner
}

func newHold(o options) *hold {
	return &hold{on: o.flag("hold"), in: bufio.NewScanner(os.Stdin)}
}

func (h *hold) await(txn int) {
	if !h.on {
		return
	}
	event("hold", map[string]any{"txn": txn})
	h.on = h.in.Scan()
}

// txnProduceSettings are txn-produce's options.
type txnProduceSettings struct {
	topic, id      string
	count, batches int
	startTs        int64
	ends           []string
	hold           *hold
	timeout        time.Duration
}

func txnProduceOptions(o options) txnProduceSettings {
	s := txnProduceSettings{
		topic: o.required("topic"), id: o.required("transactional-id"),
		count: o.int("count", -1), batches: o.int("batches", 1),
		startTs: o.int64("start-ts", time.Now().UnixMilli()), ends: txnEnds(o),
		hold: newHold(o), timeout: o.timeout(60),
	}
	if s.count < 0 || s.batches < 1 {
		panic(badUsage("bad --count or --batches"))
	}
	if o.has("flush") {
		panic(unsupported("--flush is the Java driver's"))
	}
	return s
}

// bounds: transaction k's records [first, end).
func (s txnProduceSettings) bounds(k int) (int, int) {
	return k * s.count / s.batches, (k + 1) * s.count / s.batches
}

func txnEvent(how string, k, first, end int) {
	event(how, map[string]any{"txn": k, "first": first, "count": end - first})
}

// txnCopySettings are txn-copy's options.
type txnCopySettings struct {
	topic, output, group, id string
	count, batch, maxBatches int
	idle, timeout            time.Duration
	ends                     []string
	hold                     *hold
}

func txnCopyOptions(o options) txnCopySettings {
	return txnCopySettings{
		topic: o.required("topic"), output: o.required("output"), group: o.required("group"),
		id: o.required("transactional-id"), count: o.int("count", 0), batch: o.int("batch", 10),
		maxBatches: o.int("max-batches", 0), idle: o.seconds("idle", 0), timeout: o.timeout(60),
		ends: txnEnds(o), hold: newHold(o),
	}
}

// copyState counts txn-copy's transactions and says when to stop.
type copyState struct {
	txnCopySettings
	committed, aborted, txn int
	last, deadline          time.Time
	timedOut                bool
}

func newCopyState(s txnCopySettings) *copyState {
	now := time.Now()
	return &copyState{txnCopySettings: s, last: now, deadline: now.Add(s.timeout)}
}

// done: --count committed, --max-batches transactions, --idle without records, or the
// timeout (then timedOut).
func (c *copyState) done() bool {
	now := time.Now()
	switch {
	case c.count > 0 && c.committed >= c.count, c.maxBatches > 0 && c.txn >= c.maxBatches,
		c.idle > 0 && now.Sub(c.last) >= c.idle:
		return true
	case !now.Before(c.deadline):
		c.timedOut = true
		return true
	}
	return false
}

// ended: one transaction's event; how is what happened (a commit may have become an abort).
func (c *copyState) ended(how string, records int, offsets map[int32]int64, keys []any) {
	if how == "commit" {
		c.committed += records
	} else {
		c.aborted += records
	}
	event(how, map[string]any{"txn": c.txn, "records": records, "offsets": offsetsJSON(offsets),
		"keys": keys})
	c.txn++
}

// closed: the last line; a timeout is the contract's TIMEOUT error line and exit 1.
func (c *copyState) closed() int {
	event("closed", map[string]any{"committed": c.committed, "aborted": c.aborted})
	if c.timedOut {
		msg := "txn-copy: " + itoa(c.committed) + " of " + itoa(c.count) +
			" records committed in " + c.timeout.String()
		logf("%s", msg)
		printLine(map[string]any{"error": "TIMEOUT", "message": msg})
		return exitFailed
	}
	return exitOK
}

// fenceEvent: txn-fence's lines.
func fenceEvent(kind, producer string, extra map[string]any) {
	fields := map[string]any{"producer": producer}
	for k, v := range extra {
		fields[k] = v
	}
	event(kind, fields)
}

// notFenced: A committed after B initialized.
func notFenced() int {
	fenceEvent("not-fenced", "A", nil)
	printLine(map[string]any{"error": "NOT_FENCED",
		"message": "the first producer committed after the second one initialized"})
	return exitFailed
}
