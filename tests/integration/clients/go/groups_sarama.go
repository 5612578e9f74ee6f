package main

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// saramaStrategies: --assignor as Sarama's balance strategies (its default: range).
var saramaStrategies = map[string]func() sarama.BalanceStrategy{
	"":                   sarama.NewBalanceStrategyRange,
	"range":              sarama.NewBalanceStrategyRange,
	"roundrobin":         sarama.NewBalanceStrategyRoundRobin,
	"sticky":             sarama.NewBalanceStrategySticky,
	"cooperative-sticky": sarama.NewBalanceStrategyCooperativeSticky,
}

// saramaMember is group-consume on Sarama's ConsumerGroup: a handler whose Setup starts each
// session (eager: every rebalance; cooperative: the first join only), one ConsumeClaim
// goroutine per partition, Cleanup at the session's end. Sarama has no rebalance listener:
// "assigned" is printed from Setup (the whole assignment) and, in a cooperative session, from
// the first new claim of a rebalance (what it adds); "revoked" from Cleanup (everything) and,
// cooperative, when a claim's channel closes while its session goes on.
type saramaMember struct {
	*member
	cg      sarama.ConsumerGroup
	session sarama.ConsumerGroupSession // the current one (nil between sessions)
	resumed chan struct{}               // closed when the paused partitions are resumed
}

// markAndCommit marks the offsets and commits them synchronously (Session.Commit). Sarama
// reports a failed commit on its Errors() channel only: the driver prints it as an error event
// and the commit event says null.
func (m *saramaMember) markAndCommit(s sarama.ConsumerGroupSession, offsets map[int32]int64,
	via string) {
	if len(offsets) == 0 {
		return
	}
	for p, o := range offsets {
		s.MarkOffset(m.topic, p, o, "")
	}
	s.Commit()
	m.commitEvent(via, offsets, "", map[string]any{})
}

func (m *saramaMember) Setup(s sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.session = s
	m.assigned(s.Claims()[m.topic], s.GenerationID(), s.MemberID())
	return nil
}

func (m *saramaMember) Cleanup(s sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.session = nil
	if len(m.owned) == 0 {
		return nil
	}
	if m.commit == "sync" {
		m.markAndCommit(s, m.toCommit(), "revoke")
	}
	m.revoked("revoked", sortedPartitions(m.owned))
	return nil
}

// claimStarted prints a cooperative rebalance's new partitions (the first claim of it finds
// them all in the session's claims); a partition to pause waits here until resumed, reading
// nothing (records may already be in the claim's channel: none of them is processed).
func (m *saramaMember) claimStarted(s sarama.ConsumerGroupSession, p int32) bool {
	m.mu.Lock()
	var added []int32
	for _, x := range s.Claims()[m.topic] {
		if !m.owned[x] {
			added = append(added, x)
		}
	}
	if len(added) > 0 {
		m.assigned(added, s.GenerationID(), s.MemberID())
	}
	hold := m.pauseState == "paused" && contains(m.paused, p)
	m.mu.Unlock()
	if hold {
		m.cg.Pause(map[string][]int32{m.topic: {p}})
		select {
		case <-m.resumed:
		case <-s.Context().Done():
			return false
		}
	}
	return true
}

func contains(ps []int32, p int32) bool {
	for _, x := range ps {
		if x == p {
			return true
		}
	}
	return false
}

func (m *saramaMember) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	p := c.Partition()
	if !m.claimStarted(s, p) {
		return nil
	}
	for {
		select {
		case msg, ok := <-c.Messages():
			if !ok {
				m.claimEnded(s, p)
				return nil
			}
			m.mu.Lock()
			if m.done() { // not processed: neither marked nor committed
				m.mu.Unlock()
				return nil
			}
			if m.processed(p, msg.Offset, msg.Key) {
				m.markAndCommit(s, map[int32]int64{p: msg.Offset + 1}, "offsets")
			}
			switch {
			case m.commit == "auto":
				s.MarkMessage(msg, "")
			case m.commit == "sync" && len(c.Messages()) == 0: // after what one fetch brought
				m.markAndCommit(s, m.toCommit(), "sync")
			}
			m.mu.Unlock()
		case <-s.Context().Done():
			return nil
		}
	}
}

// claimEnded: a claim's channel closed while its session goes on, a cooperative revocation.
func (m *saramaMember) claimEnded(s sarama.ConsumerGroupSession, p int32) {
	if s.Context().Err() != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.owned[p] {
		return
	}
	if n, ok := m.next[p]; ok && m.commit == "sync" {
		m.markAndCommit(s, map[int32]int64{p: n}, "revoke")
	}
	m.revoked("revoked", []int32{p})
}

func (saramaLib) groupConsume(o options) (int, error) {
	m := &saramaMember{member: newMember(o), resumed: make(chan struct{})}
	switch {
	case m.protocol == "consumer":
		return 0, unsupported("Sarama has no KIP-848 consumer group protocol")
	case len(m.seeks) > 0:
		return 0, unsupported("Sarama's consumer group cannot seek a claimed partition")
	case m.commit == "async":
		return 0, unsupported("Sarama has no asynchronous commit with a result")
	}
	strategy, ok := saramaStrategies[m.assignor]
	if !ok {
		return 0, badUsage("unknown --assignor %s", m.assignor)
	}
	cfg, err := saramaConfig(o)
	if err != nil {
		return 0, fatal(err)
	}
	g := &cfg.Consumer.Group
	g.Rebalance.GroupStrategies = []sarama.BalanceStrategy{strategy()}
	if o.has("session-timeout") {
		g.Session.Timeout = o.seconds("session-timeout", 0)
	}
	if o.has("heartbeat-interval") {
		g.Heartbeat.Interval = o.seconds("heartbeat-interval", 0)
	}
	if o.has("max-poll-interval") { // Java's max.poll.interval.ms is the rebalance timeout
		g.Rebalance.Timeout = o.seconds("max-poll-interval", 0)
	}
	g.InstanceId = m.instanceID
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	if m.offsetReset == "latest" {
		cfg.Consumer.Offsets.Initial = sarama.OffsetNewest
	}
	cfg.Consumer.Offsets.AutoCommit.Enable = m.commit == "auto"
	if o.has("auto-commit-interval") {
		cfg.Consumer.Offsets.AutoCommit.Interval = o.seconds("auto-commit-interval", 0)
	}
	cfg.Consumer.Return.Errors = true
	cg, err := sarama.NewConsumerGroup(brokers(o), m.group, cfg)
	if err != nil {
		return 0, fatal(err)
	}
	m.cg = cg
	go func() {
		for err := range cg.Errors() {
			event("error", map[string]any{"error": errorName(err), "message": err.Error()})
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // stop conditions and "resume", while Consume runs
		defer wg.Done()
		for ctx.Err() == nil {
			m.mu.Lock()
			resume, done := m.resumeDue(), m.done()
			if done && m.session != nil && m.commit == "sync" {
				m.markAndCommit(m.session, m.toCommit(), "close")
			}
			m.mu.Unlock()
			if resume != nil {
				cg.Resume(map[string][]int32{m.topic: resume})
				close(m.resumed)
			}
			if done {
				cancel()
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	var failure error
	for ctx.Err() == nil { // eager: one Consume per session
		err := cg.Consume(ctx, []string{m.topic}, m)
		if err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) && ctx.Err() == nil {
			event("error", map[string]any{"error": errorName(err), "message": err.Error()})
			if errors.Is(err, sarama.ErrInvalidGroupId) || errors.Is(err, sarama.ErrFencedInstancedId) {
				failure = err
				cancel()
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	wg.Wait()
	if err := cg.Close(); err != nil { // leaves the group (a static member stays)
		logf("group-consume: close: %v", err)
	}
	if failure != nil {
		return 0, fatal(failure)
	}
	m.closed()
	return exitOK, nil
}

// describeGroup: ClusterAdmin.DescribeConsumerGroups (DescribeGroups, the classic API: Sarama
// has no ConsumerGroupDescribe in its admin; "type" is null) and Coordinator.
func (saramaLib) describeGroup(o options) (int, error) {
	group := o.required("group")
	cfg, err := saramaConfig(o)
	if err != nil {
		return 0, err
	}
	adm, err := sarama.NewClusterAdmin(brokers(o), cfg)
	if err != nil {
		return 0, err
	}
	defer adm.Close()
	described, err := adm.DescribeConsumerGroups([]string{group})
	if err != nil {
		return 0, err
	}
	d := described[0]
	if d.Err != sarama.ErrNoError {
		printLine(map[string]any{"group": group, "error": errorName(d.Err)})
		return exitOK, nil
	}
	coordinator, err := adm.Coordinator(group)
	if err != nil {
		return 0, err
	}
	ids := sortedKeys(d.Members)
	members := []map[string]any{}
	for _, id := range ids {
		x := d.Members[id]
		topics := map[string][]int32{}
		if a, err := x.GetMemberAssignment(); err == nil && a != nil {
			topics = a.Topics
		}
		members = append(members, memberReport(id, x.GroupInstanceId, x.ClientId, x.ClientHost,
			topics))
	}
	printLine(groupReport(group, d.State, nil, d.Protocol, coordinator.ID(), members))
	return exitOK, nil
}

// saramaPartitions: the topic's partitions from the admin's metadata.
func saramaPartitions(adm sarama.ClusterAdmin, topic string) ([]int32, error) {
	md, err := adm.DescribeTopics([]string{topic})
	if err != nil {
		return nil, err
	}
	if len(md) == 0 || md[0].Err != sarama.ErrNoError {
		if len(md) > 0 {
			return nil, md[0].Err
		}
		return nil, sarama.ErrUnknownTopicOrPartition
	}
	var out []int32
	for _, p := range md[0].Partitions {
		out = append(out, p.ID)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// committed: ClusterAdmin.ListConsumerGroupOffsets (OffsetFetch) of the topic's partitions.
func (saramaLib) committed(o options) (int, error) {
	topic, group := o.required("topic"), o.required("group")
	cfg, err := saramaConfig(o)
	if err != nil {
		return 0, err
	}
	adm, err := sarama.NewClusterAdmin(brokers(o), cfg)
	if err != nil {
		return 0, err
	}
	defer adm.Close()
	parts, err := saramaPartitions(adm, topic)
	if err != nil {
		return 0, err
	}
	res, err := adm.ListConsumerGroupOffsets(group, map[string][]int32{topic: parts})
	if err != nil {
		return 0, err
	}
	if res.Err != sarama.ErrNoError {
		return 0, res.Err
	}
	out := map[int32]int64{}
	for _, p := range parts {
		out[p] = -1
		if b := res.GetBlock(topic, p); b != nil {
			if b.Err != sarama.ErrNoError {
				return 0, b.Err
			}
			out[p] = b.Offset
		}
	}
	printLine(offsetsJSON(out))
	return exitOK, nil
}

// commit: Sarama's admin has no offset commit, so an OffsetCommitRequest of its protocol layer
// goes to the coordinator (Client.Coordinator, Broker.CommitOffset): generation -1 and no
// member id from outside the group, or --member-id/--generation/--instance-id.
func (saramaLib) commit(o options) (int, error) {
	topic, group := o.required("topic"), o.str("group", "")
	offsets, err := partitionOffsets(o.required("offsets"))
	if err != nil {
		return 0, err
	}
	cfg, err := saramaConfig(o)
	if err != nil {
		return 0, err
	}
	cl, err := sarama.NewClient(brokers(o), cfg)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	coordinator, err := cl.Coordinator(group)
	if err != nil {
		return commitFailed(offsets, err)
	}
	req := &sarama.OffsetCommitRequest{
		Version: 7, ConsumerGroup: group, ConsumerID: o.str("member-id", ""),
		ConsumerGroupGeneration: int32(o.int("generation", -1)),
	}
	if o.has("instance-id") {
		id := o.str("instance-id", "")
		req.GroupInstanceId = &id
	}
	for _, p := range sortedPartitions(offsets) {
		req.AddBlockWithLeaderEpoch(topic, p, offsets[p], -1, 0, "")
	}
	resp, err := coordinator.CommitOffset(req)
	if err != nil {
		return commitFailed(offsets, err)
	}
	errs := map[int32]string{}
	for p := range offsets {
		errs[p] = ""
		if e, ok := resp.Errors[topic][p]; ok && e != sarama.ErrNoError {
			errs[p] = codeName(int16(e))
		}
	}
	printLine(commitReport(errs))
	return exitOK, nil
}
