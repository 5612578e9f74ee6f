package main

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// franzBalancer: --assignor as a kgo balancer. Under KIP-848 (--protocol consumer) kgo names
// the broker's assignor by its balancer: RangeBalancer asks for "range", StickyBalancer for
// "uniform" (the default).
func franzBalancer(s groupSettings) (kgo.GroupBalancer, error) {
	if s.protocol == "consumer" {
		switch s.assignor {
		case "", "uniform":
			return kgo.StickyBalancer(), nil
		case "range":
			return kgo.RangeBalancer(), nil
		}
		return nil, badUsage("unknown --assignor %s for --protocol consumer", s.assignor)
	}
	switch s.assignor {
	case "", "cooperative-sticky": // kgo's default
		return kgo.CooperativeStickyBalancer(), nil
	case "range":
		return kgo.RangeBalancer(), nil
	case "roundrobin":
		return kgo.RoundRobinBalancer(), nil
	case "sticky":
		return kgo.StickyBalancer(), nil
	}
	return nil, badUsage("unknown --assignor %s", s.assignor)
}

func epochOffsets(topic string, offsets map[int32]int64) map[string]map[int32]kgo.EpochOffset {
	out := map[int32]kgo.EpochOffset{}
	for p, o := range offsets {
		out[p] = kgo.EpochOffset{Epoch: -1, Offset: o}
	}
	return map[string]map[int32]kgo.EpochOffset{topic: out}
}

// franzCommitResult: what a commit's onDone got, as (error, partition errors).
func franzCommitResult(resp *kmsg.OffsetCommitResponse, err error) (string, map[string]any) {
	perr := map[string]any{}
	first := errorName(err)
	if resp != nil {
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if name := codeName(p.ErrorCode); name != "" {
					perr[strconv.Itoa(int(p.Partition))] = name
					if first == "" {
						first = name
					}
				}
			}
		}
	}
	return first, perr
}

// franzMember is group-consume on kgo: a poll loop with BlockRebalanceOnPoll, so the rebalance
// callbacks run between polls, as Java's run inside poll().
type franzMember struct {
	*member
	cl *kgo.Client
}

func (m *franzMember) commitSync(offsets map[int32]int64, via string) {
	if len(offsets) == 0 {
		return
	}
	m.cl.CommitOffsetsSync(context.Background(), epochOffsets(m.topic, offsets),
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			name, perr := franzCommitResult(resp, err)
			m.commitEvent(via, offsets, name, perr)
		})
}

// onAssigned: kgo calls it after every join, with nothing new too (as Java does).
func (m *franzMember) onAssigned(_ context.Context, cl *kgo.Client, got map[string][]int32) {
	memberID, generation := cl.GroupMetadata()
	if hit := m.assigned(got[m.topic], generation, memberID); len(hit) > 0 {
		cl.PauseFetchPartitions(map[string][]int32{m.topic: hit})
	}
}

func (m *franzMember) onRevoked(ctx context.Context, cl *kgo.Client, gone map[string][]int32) {
	if len(gone[m.topic]) == 0 {
		return
	}
	switch m.commit {
	case "sync", "async":
		offsets := map[int32]int64{}
		for _, p := range gone[m.topic] {
			if n, ok := m.next[p]; ok {
				offsets[p] = n
			}
		}
		m.commitSync(offsets, "revoke")
	case "auto": // what kgo's own revoke callback does when autocommitting
		if err := cl.CommitMarkedOffsets(ctx); err != nil {
			logf("group-consume: commit on revoke: %v", err)
		}
	}
	m.revoked("revoked", gone[m.topic])
}

func (m *franzMember) onLost(_ context.Context, _ *kgo.Client, gone map[string][]int32) {
	if len(gone[m.topic]) > 0 {
		m.revoked("lost", gone[m.topic])
	}
}

func (franz) groupConsume(o options) (int, error) {
	m := &franzMember{member: newMember(o)}
	balancer, err := franzBalancer(m.groupSettings)
	if err != nil {
		return 0, err
	}
	start := kgo.NewOffset().AtStart()
	if m.offsetReset == "latest" {
		start = kgo.NewOffset().AtEnd()
	}
	opts := []kgo.Opt{
		kgo.ConsumerGroup(m.group), kgo.ConsumeTopics(m.topic), kgo.ConsumeResetOffset(start),
		kgo.Balancers(balancer), kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(m.onAssigned), kgo.OnPartitionsRevoked(m.onRevoked),
		kgo.OnPartitionsLost(m.onLost),
	}
	if m.protocol == "consumer" {
		opts = append(opts, kgo.ServerSideBalancer())
	} else {
		if o.has("session-timeout") {
			opts = append(opts, kgo.SessionTimeout(o.seconds("session-timeout", 0)))
		}
		if o.has("heartbeat-interval") {
			opts = append(opts, kgo.HeartbeatInterval(o.seconds("heartbeat-interval", 0)))
		}
	}
	if o.has("max-poll-interval") { // Java's max.poll.interval.ms is the rebalance timeout
		opts = append(opts, kgo.RebalanceTimeout(o.seconds("max-poll-interval", 0)))
	}
	if m.instanceID != "" {
		opts = append(opts, kgo.InstanceID(m.instanceID))
	}
	if m.commit == "auto" { // of processed records only: each is marked once processed
		opts = append(opts, kgo.AutoCommitMarks())
		if o.has("auto-commit-interval") {
			opts = append(opts, kgo.AutoCommitInterval(o.seconds("auto-commit-interval", 0)))
		}
	} else {
		opts = append(opts, kgo.DisableAutoCommit())
	}
	cl, err := franzClient(o, opts...)
	if err != nil {
		return 0, fatal(err)
	}
	m.cl = cl
	defer cl.Close()
	for !m.done() {
		if resume := m.resumeDue(); resume != nil {
			cl.ResumeFetchPartitions(map[string][]int32{m.topic: resume})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		fetches := cl.PollFetches(ctx)
		cancel()
		if err := m.pollErrors(fetches); err != nil {
			cl.AllowRebalance()
			return 0, fatal(err)
		}
		any := false
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			for _, r := range p.Records {
				if m.done() { // not processed: neither committed nor marked
					return
				}
				if to, skip := m.seekAt(r.Partition, r.Offset); skip {
					cl.SetOffsets(epochOffsets(m.topic, map[int32]int64{r.Partition: to}))
					return // the rest of this batch is from before the seek
				}
				any = true
				due := m.processed(r.Partition, r.Offset, r.Key)
				if m.commit == "auto" {
					cl.MarkCommitRecords(r)
				}
				if due {
					m.commitSync(map[int32]int64{r.Partition: r.Offset + 1}, "offsets")
				}
			}
		})
		if any && m.commit == "sync" {
			m.commitSync(m.toCommit(), "sync")
		} else if any && m.commit == "async" {
			offsets := m.toCommit()
			cl.CommitOffsets(context.Background(), epochOffsets(m.topic, offsets),
				func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
					name, perr := franzCommitResult(resp, err)
					m.commitEvent("callback", offsets, name, perr)
				})
		}
		cl.AllowRebalance()
	}
	if m.commit == "sync" || m.commit == "async" {
		m.commitSync(m.toCommit(), "close")
	}
	cl.Close() // leaves the group (a static member stays); the revoke callback runs first
	m.closed()
	return exitOK, nil
}

// pollErrors prints the errors of a poll as events; a group error the member cannot recover
// from (authorization, a bad group id, fencing of a static member) is returned.
func (m *franzMember) pollErrors(fetches kgo.Fetches) error {
	var fatalErr error
	fetches.EachError(func(t string, p int32, err error) {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return
		}
		event("error", map[string]any{"error": errorName(err), "message": err.Error()})
		var ke *kerr.Error
		if errors.As(err, &ke) && !ke.Retriable && t == "" && fatalErr == nil &&
			(errors.Is(err, kerr.InvalidGroupID) || errors.Is(err, kerr.FencedInstanceID)) {
			fatalErr = err
		}
	})
	return fatalErr
}

// describeGroup: kadm's DescribeConsumerGroups (ConsumerGroupDescribe, KIP-848) and, for a
// classic group (GROUP_ID_NOT_FOUND there), DescribeGroups, as Java's admin does.
func (franz) describeGroup(o options) (int, error) {
	group := o.required("group")
	adm, cl, err := franzAdmin(o)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	ctx, cancel := deadline(o, 60)
	defer cancel()
	if dcg, err := adm.DescribeConsumerGroups(ctx, group); err == nil && dcg[group].Err == nil {
		d := dcg[group]
		members := []map[string]any{}
		for _, x := range d.Members {
			topics := map[string][]int32{}
			x.Assignment.Each(func(t string, p int32) { topics[t] = append(topics[t], p) })
			members = append(members, memberReport(x.MemberID, x.InstanceID, x.ClientID,
				x.ClientHost, topics))
		}
		printLine(groupReport(group, d.State, "CONSUMER", d.AssignorName, d.Coordinator.NodeID,
			members))
		return exitOK, nil
	}
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return 0, err
	}
	d := described[group]
	if d.Err != nil {
		printLine(map[string]any{"group": group, "error": errorName(d.Err)})
		return exitOK, nil
	}
	members := []map[string]any{}
	for _, x := range d.Members {
		topics := map[string][]int32{}
		if c, ok := x.Assigned.AsConsumer(); ok {
			for _, t := range c.Topics {
				topics[t.Topic] = t.Partitions
			}
		}
		members = append(members, memberReport(x.MemberID, x.InstanceID, x.ClientID,
			x.ClientHost, topics))
	}
	printLine(groupReport(group, d.State, "CLASSIC", d.Protocol, d.Coordinator.NodeID, members))
	return exitOK, nil
}

// committed: kadm's FetchOffsetsForTopics (-1 for a partition without a commit).
func (franz) committed(o options) (int, error) {
	topic, group := o.required("topic"), o.required("group")
	adm, cl, err := franzAdmin(o)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	ctx, cancel := deadline(o, 60)
	defer cancel()
	got, err := adm.FetchOffsetsForTopics(ctx, group, topic)
	if err == nil {
		err = got.Error()
	}
	if err != nil {
		return 0, err
	}
	out := map[int32]int64{}
	for p, r := range got[topic] {
		out[p] = r.At
	}
	printLine(offsetsJSON(out))
	return exitOK, nil
}

// commit: kadm's CommitOffsets from outside the group (generation -1, no member id); with
// --member-id/--generation an OffsetCommitRequest of kgo's protocol layer (kmsg) carrying them,
// which kgo sends to the group's coordinator.
func (franz) commit(o options) (int, error) {
	topic, group := o.required("topic"), o.str("group", "")
	offsets, err := partitionOffsets(o.required("offsets"))
	if err != nil {
		return 0, err
	}
	adm, cl, err := franzAdmin(o)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	ctx, cancel := deadline(o, 60)
	defer cancel()
	errs := map[int32]string{}
	if !o.has("member-id") && !o.has("generation") {
		commits := kadm.Offsets{topic: {}}
		for p, at := range offsets {
			commits[topic][p] = kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: -1}
		}
		res, err := adm.CommitOffsets(ctx, group, commits)
		if err != nil {
			return commitFailed(offsets, err)
		}
		for p := range offsets {
			r, _ := res.Lookup(topic, p)
			errs[p] = errorName(r.Err)
		}
		printLine(commitReport(errs))
		return exitOK, nil
	}
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group = group
	req.MemberID = o.str("member-id", "")
	req.Generation = int32(o.int("generation", -1))
	if o.has("instance-id") {
		id := o.str("instance-id", "")
		req.InstanceID = &id
	}
	// v10+ names the topic by its id (kgo sends the newest version both sides have).
	topics, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return 0, err
	}
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic, rt.TopicID = topic, topics[topic].ID
	for _, p := range sortedPartitions(offsets) {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = p, offsets[p], -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return commitFailed(offsets, err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			errs[p.Partition] = codeName(p.ErrorCode)
		}
	}
	printLine(commitReport(errs))
	return exitOK, nil
}
