package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// groupSettings are group-consume's options (../README.md, "Consumer groups").
type groupSettings struct {
	topic, group, commit, protocol, assignor, instanceID, offsetReset string
	maxRecords, commitEvery, stallAt                                  int
	duration, process, stall                                          time.Duration
	seeks                                                             map[int32][2]int64 // p -> {offset, at (-1: first record)}
	pause                                                             []int32
}

func groupOptions(o options) groupSettings {
	s := groupSettings{
		topic:       o.required("topic"),
		group:       o.required("group"),
		commit:      o.oneOf("commit", "auto", "sync", "async", "offsets", "none"),
		protocol:    o.oneOf("protocol", "classic", "consumer"),
		assignor:    o.str("assignor", ""),
		instanceID:  o.str("instance-id", ""),
		offsetReset: o.oneOf("offset-reset", "earliest", "latest"),
		maxRecords:  o.int("max-records", 0),
		commitEvery: o.int("commit-every", 1),
		stallAt:     o.int("stall-at", 0),
		duration:    o.seconds("duration", 0),
		process:     time.Duration(o.float("process-ms", 0) * float64(time.Millisecond)),
		stall:       time.Duration(o.float("stall-ms", 0) * float64(time.Millisecond)),
		seeks:       map[int32][2]int64{},
	}
	for _, item := range strings.Split(o.str("seek", ""), ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		p, rest, _ := strings.Cut(item, ":")
		off, at, hasAt := strings.Cut(rest, "@")
		pn, err1 := strconv.Atoi(strings.TrimSpace(p))
		on, err2 := strconv.ParseInt(strings.TrimSpace(off), 10, 64)
		an := int64(-1)
		var err3 error
		if hasAt {
			an, err3 = strconv.ParseInt(strings.TrimSpace(at), 10, 64)
		}
		if err1 != nil || err2 != nil || err3 != nil {
			panic(badUsage("bad --seek %q", item))
		}
		s.seeks[int32(pn)] = [2]int64{on, an}
	}
	pause, err := int32List(o.str("pause", ""))
	if err != nil {
		panic(err)
	}
	s.pause = pause
	return s
}

// member is the state of one group-consume run that both libraries share: what it owns, what
// it processed, its stop conditions, and the events it prints. mu serializes processing with
// the rebalance callbacks (Sarama runs each claim on a goroutine of its own).
type member struct {
	groupSettings
	mu          sync.Mutex
	stopped     atomic.Bool // stdin said stop, or ended
	resumeAsked atomic.Bool // stdin said resume
	started     time.Time
	records     int
	next        map[int32]int64 // partition -> the offset after its last processed record
	owned       map[int32]bool
	pauseState  string // "pending" (waiting for a --pause partition), "paused", "done"
	paused      []int32
}

func newMember(o options) *member {
	m := &member{groupSettings: groupOptions(o), started: time.Now(),
		next: map[int32]int64{}, owned: map[int32]bool{}, pauseState: "done"}
	if len(m.pause) > 0 {
		m.pauseState = "pending"
	}
	if o.flag("stop-on-eof") {
		go m.readStdin()
	}
	return m
}

// readStdin: "stop" or the end of stdin stops the member, "resume" resumes what --pause paused.
func (m *member) readStdin() {
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch strings.TrimSpace(in.Text()) {
		case "stop":
			m.stopped.Store(true)
			return
		case "resume":
			m.resumeAsked.Store(true)
		}
	}
	m.stopped.Store(true)
}

// done: stopped, --max-records reached or --duration over (call with mu held or from the one
// goroutine that processes).
func (m *member) done() bool {
	return m.stopped.Load() || (m.maxRecords > 0 && m.records >= m.maxRecords) ||
		(m.duration > 0 && time.Since(m.started) >= m.duration)
}

// seekAt: a --seek of this partition due at this record: consumed, its event printed; the
// offset to seek to, and whether the record is not at it (the caller seeks and skips).
func (m *member) seekAt(p int32, offset int64) (int64, bool) {
	s, ok := m.seeks[p]
	if !ok || (s[1] >= 0 && s[1] != offset) {
		return 0, false
	}
	delete(m.seeks, p)
	event("seek", map[string]any{"partition": p, "offset": s[0], "at": offset})
	return s[0], s[0] != offset
}

// processed: one record's work (--process-ms, --stall-*) and its event; whether a --commit
// offsets commit is due after it.
func (m *member) processed(p int32, offset int64, key []byte) bool {
	work := m.process
	if m.records+1 == m.stallAt {
		work += m.stall
	}
	time.Sleep(work)
	m.records++
	m.next[p] = offset + 1
	event("record", map[string]any{"partition": p, "offset": offset, "key": latin1(key)})
	return m.commit == "offsets" && m.records%m.commitEvery == 0
}

// toCommit: the processed offsets of the owned partitions.
func (m *member) toCommit() map[int32]int64 {
	out := map[int32]int64{}
	for p := range m.owned {
		if n, ok := m.next[p]; ok {
			out[p] = n
		}
	}
	return out
}

func (m *member) commitEvent(via string, offsets map[int32]int64, err string,
	partitionErrors map[string]any) {
	event("commit", map[string]any{"via": via, "offsets": offsetsJSON(offsets),
		"error": nullable(err), "partition_errors": partitionErrors})
}

// assigned records partitions given to the member and prints the event; the --pause
// partitions among them, to pause now (the first time only).
func (m *member) assigned(got []int32, generation int32, memberID string) []int32 {
	gotSet := map[int32]bool{}
	for _, p := range got {
		m.owned[p], gotSet[p] = true, true
	}
	var gen any = generation
	if generation < 0 {
		gen = nil
	}
	event("assigned", map[string]any{"partitions": sortedInt32(gotSet),
		"owned": sortedInt32(m.owned), "generation": gen, "member_id": nullable(memberID)})
	if m.pauseState != "pending" {
		return nil
	}
	var hit []int32
	for _, p := range m.pause {
		if gotSet[p] {
			hit = append(hit, p)
		}
	}
	if len(hit) > 0 {
		m.pauseState, m.paused = "paused", hit
		event("paused", map[string]any{"partitions": hit})
	}
	return hit
}

// revoked: partitions taken away ("revoked") or lost ("lost").
func (m *member) revoked(kind string, gone []int32) {
	goneSet := map[int32]bool{}
	for _, p := range gone {
		goneSet[p] = true
		delete(m.owned, p)
		delete(m.next, p)
	}
	event(kind, map[string]any{"partitions": sortedInt32(goneSet), "owned": sortedInt32(m.owned)})
}

// resumeDue: the paused partitions to resume now (a "resume" line came), once.
func (m *member) resumeDue() []int32 {
	if m.pauseState != "paused" || !m.resumeAsked.Load() {
		return nil
	}
	m.pauseState = "done"
	event("resumed", map[string]any{"partitions": m.paused})
	return m.paused
}

func (m *member) closed() {
	event("closed", map[string]any{"records": m.records})
}

// fatal prints the error event of an error that ends the member.
func fatal(err error) error {
	event("error", map[string]any{"error": errorName(err), "message": err.Error(), "fatal": true})
	return err
}

// groupReport: describe-group's line.
func groupReport(group string, state, kind, protocol any, coordinator int32,
	members []map[string]any) map[string]any {
	return map[string]any{"group": group, "error": nil, "state": state, "type": kind,
		"protocol": protocol, "coordinator": coordinator, "members": members}
}

func memberReport(memberID string, instanceID *string, clientID, host string,
	topics map[string][]int32) map[string]any {
	parts := []any{}
	for _, t := range sortedKeys(topics) {
		ps := append([]int32(nil), topics[t]...)
		for _, p := range sortedPartitions(setOf(ps)) {
			parts = append(parts, []any{t, p})
		}
	}
	var inst any
	if instanceID != nil {
		inst = *instanceID
	}
	return map[string]any{"member_id": memberID, "instance_id": inst, "client_id": clientID,
		"host": host, "partitions": parts}
}

func setOf(ps []int32) map[int32]bool {
	out := map[int32]bool{}
	for _, p := range ps {
		out[p] = true
	}
	return out
}

// commitReport: commit's line; errs are Kafka's names per partition ("" = none).
func commitReport(errs map[int32]string) map[string]any {
	parts := map[string]any{}
	var first any
	for _, p := range sortedPartitions(errs) {
		parts[strconv.Itoa(int(p))] = nullable(errs[p])
		if first == nil && errs[p] != "" {
			first = errs[p]
		}
	}
	return map[string]any{"error": first, "partitions": parts}
}

// commitFailed: a commit whose whole call failed with a Kafka error (e.g. INVALID_GROUP_ID from
// FindCoordinator) is the broker's answer, that error for every partition, exit 0; any other
// failure ends the run.
func commitFailed(offsets map[int32]int64, err error) (int, error) {
	name := errorName(err)
	if !isKafkaError(err) {
		return 0, err
	}
	errs := map[int32]string{}
	for p := range offsets {
		errs[p] = name
	}
	printLine(commitReport(errs))
	return exitOK, nil
}
