package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func (franz) createTopic(o options) (int, error) {
	topic, partitions := o.required("topic"), o.int("partitions", -1)
	rf := int16(o.int("replication-factor", -1)) // -1: the broker's default
	adm, cl, err := franzAdmin(o)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	ctx, cancel := deadline(o, 60)
	defer cancel()
	res, err := adm.CreateTopic(ctx, int32(partitions), rf, nil, topic)
	if err == nil {
		err = res.Err
	}
	if errors.Is(err, kerr.TopicAlreadyExists) {
		logf("create-topic: topic already exists: %v", err)
		return exitTopicExists, nil
	}
	if err != nil {
		return 0, err
	}
	printLine(map[string]any{"topic": topic, "partitions": partitions})
	return exitOK, nil
}

var franzCodecs = map[string]kgo.CompressionCodec{
	"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(),
	"snappy": kgo.SnappyCompression(), "lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
}

var franzAcks = map[string]kgo.Acks{"-1": kgo.AllISRAcks(), "0": kgo.NoAck(), "1": kgo.LeaderAck()}

// franzRecord: reference record i for topic.
func franzRecord(topic string, i int, startTs int64) *kgo.Record {
	ref := referenceRecord(i, startTs)
	r := &kgo.Record{Topic: topic, Key: ref.key, Value: ref.value}
	r.Timestamp = msTime(ref.timestamp)
	for _, h := range ref.headers {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: string(h[0]), Value: h[1]})
	}
	return r
}

// produce: kgo's own partitioner (sticky, murmur2 on keys as Java's), idempotent unless acks is
// not -1 (kgo's idempotence needs acks=all) or --idempotence false.
func (franz) produce(o options) (int, error) {
	s := produceOptions(o)
	topic := o.required("topic")
	opts := []kgo.Opt{
		kgo.ProducerBatchCompression(franzCodecs[s.compression]),
		kgo.RequiredAcks(franzAcks[s.acks]),
		kgo.RecordDeliveryTimeout(s.timeout),
		kgo.ProducerLinger(5 * msDuration),
	}
	if s.acks != "-1" || s.idempotence == "false" {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	cl, err := franzClient(o, opts...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	var mu sync.Mutex
	var first error
	failed := 0
	var wg sync.WaitGroup
	for i := 0; i < s.count; i++ {
		mu.Lock()
		stop := first != nil
		mu.Unlock()
		if stop {
			break
		}
		wg.Add(1)
		cl.Produce(ctx, franzRecord(topic, i, s.startTs), func(r *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				failed++
				if first == nil {
					first = err
				}
				mu.Unlock()
				logf("delivery failed for %s: %v", r.Key, err)
				return
			}
			offset := r.Offset
			if s.acks == "0" {
				offset = -1
			}
			printLine(producedLine(r.Key, r.Partition, offset, r.Timestamp.UnixMilli()))
		})
	}
	wg.Wait()
	if first != nil {
		logf("produce: %d records failed (sending stops at the first failure)", failed)
		return 0, first
	}
	return exitOK, nil
}

func franzTimestampType(r *kgo.Record) any {
	switch r.Attrs.TimestampType() {
	case 0:
		return "CreateTime"
	case 1:
		return "LogAppendTime"
	}
	return "NoTimestampType"
}

func franzHeaders(r *kgo.Record) [][2][]byte {
	hs := make([][2][]byte, 0, len(r.Headers))
	for _, h := range r.Headers {
		hs = append(hs, [2][]byte{[]byte(h.Key), h.Value})
	}
	return hs
}

// consume: no group; kgo's direct consumer of the topic takes every partition, from the start.
func (franz) consume(o options) (int, error) {
	s := consumeOptions(o)
	opts := []kgo.Opt{
		kgo.ConsumeTopics(o.required("topic")),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}
	if s.isolation != "" {
		opts = append(opts, kgo.FetchIsolationLevel(map[bool]kgo.IsolationLevel{
			true: kgo.ReadCommitted(), false: kgo.ReadUncommitted()}[s.committed]))
	}
	cl, err := franzClient(o, opts...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	seen := 0
	for seen < s.expect && ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				logf("consume: %s/%d: %v", t, p, err)
			}
		})
		fetches.EachRecord(func(r *kgo.Record) {
			if seen == s.expect {
				return
			}
			seen++
			printLine(consumedLine(r.Partition, r.Offset, r.Key, r.Value, franzHeaders(r),
				r.Timestamp.UnixMilli(), franzTimestampType(r)))
		})
	}
	if seen < s.expect {
		logf("consume: timed out with %d of %d records", seen, s.expect)
		return exitFailed, nil
	}
	return exitOK, nil
}

// offsetsForTimes: kadm's ListOffsetsAfterMilli. Where no record is at or after the time, kadm
// answers the end offset (asking again with -1, whose answer has timestamp -1): that is
// Kafka's -1 here.
func (franz) offsetsForTimes(o options) (int, error) {
	topic, ts := o.required("topic"), o.int64("timestamp", 0)
	adm, cl, err := franzAdmin(o)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	ctx, cancel := deadline(o, 60)
	defer cancel()
	listed, err := adm.ListOffsetsAfterMilli(ctx, ts, topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return 0, err
	}
	out := map[string]int64{}
	for p, lo := range listed[topic] {
		if lo.Timestamp == -1 {
			out[strconv.Itoa(int(p))] = -1
		} else {
			out[strconv.Itoa(int(p))] = lo.Offset
		}
	}
	if len(out) == 0 {
		return 0, fmt.Errorf("no partitions of %s listed", topic)
	}
	printLine(out)
	return exitOK, nil
}

// sortedPartitions: the keys of a partition map, in order.
func sortedPartitions[V any](m map[int32]V) []int32 {
	out := make([]int32, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
