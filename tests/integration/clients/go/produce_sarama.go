package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

func (saramaLib) createTopic(o options) (int, error) {
	topic, partitions := o.required("topic"), o.int("partitions", -1)
	cfg, err := saramaConfig(o)
	if err != nil {
		return 0, err
	}
	adm, err := sarama.NewClusterAdmin(brokers(o), cfg)
	if err != nil {
		return 0, err
	}
	defer adm.Close()
	detail := &sarama.TopicDetail{
		NumPartitions: int32(partitions), ReplicationFactor: int16(o.int("replication-factor", -1)),
	}
	err = adm.CreateTopic(topic, detail, false)
	if errors.Is(err, sarama.ErrTopicAlreadyExists) {
		logf("create-topic: topic already exists: %v", err)
		return exitTopicExists, nil
	}
	if err != nil {
		return 0, err
	}
	printLine(map[string]any{"topic": topic, "partitions": partitions})
	return exitOK, nil
}

var saramaCodecs = map[string]sarama.CompressionCodec{
	"none": sarama.CompressionNone, "gzip": sarama.CompressionGZIP,
	"snappy": sarama.CompressionSnappy, "lz4": sarama.CompressionLZ4, "zstd": sarama.CompressionZSTD,
}

var saramaAcks = map[string]sarama.RequiredAcks{
	"-1": sarama.WaitForAll, "0": sarama.NoResponse, "1": sarama.WaitForLocal,
}

// saramaRecord: reference record i for topic (Metadata: i).
func saramaRecord(topic string, i int, startTs int64) *sarama.ProducerMessage {
	ref := referenceRecord(i, startTs)
	m := &sarama.ProducerMessage{
		Topic: topic, Key: sarama.ByteEncoder(ref.key), Value: sarama.ByteEncoder(ref.value),
		Timestamp: msTime(ref.timestamp), Metadata: i,
	}
	for _, h := range ref.headers {
		m.Headers = append(m.Headers, sarama.RecordHeader{Key: h[0], Value: h[1]})
	}
	return m
}

// saramaProducerConfig: acks, compression, timeouts; idempotence only with --idempotence true
// (Sarama's default is off; on, it needs one request in flight per broker).
func saramaProducerConfig(o options, s produceSettings) (*sarama.Config, error) {
	cfg, err := saramaConfig(o)
	if err != nil {
		return nil, err
	}
	cfg.Producer.RequiredAcks = saramaAcks[s.acks]
	cfg.Producer.Compression = saramaCodecs[s.compression]
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.Timeout = min(s.timeout/2, 30*time.Second)
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	cfg.Producer.Retry.Max = 10
	cfg.Producer.Retry.Backoff = 200 * time.Millisecond
	if s.idempotence == "true" {
		cfg.Producer.Idempotent = true
		cfg.Net.MaxOpenRequests = 1
	}
	return cfg, nil
}

// produce: Sarama's async producer with its default partitioner (FNV-1a hash of the key).
func (saramaLib) produce(o options) (int, error) {
	s := produceOptions(o)
	topic := o.required("topic")
	cfg, err := saramaProducerConfig(o, s)
	if err != nil {
		return 0, err
	}
	p, err := sarama.NewAsyncProducer(brokers(o), cfg)
	if err != nil {
		return 0, err
	}
	var mu sync.Mutex
	var first error
	failed := 0
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for m := range p.Successes() {
			offset := m.Offset
			if s.acks == "0" {
				offset = -1
			}
			key, _ := m.Key.Encode()
			printLine(producedLine(key, m.Partition, offset, m.Timestamp.UnixMilli()))
		}
	}()
	go func() {
		defer wg.Done()
		for e := range p.Errors() {
			mu.Lock()
			failed++
			if first == nil {
				first = e.Err
			}
			mu.Unlock()
			logf("delivery failed for key-%v: %v", e.Msg.Metadata, e.Err)
		}
	}()
	timer := time.NewTimer(s.timeout)
	defer timer.Stop()
sending:
	for i := 0; i < s.count; i++ {
		mu.Lock()
		stop := first != nil
		mu.Unlock()
		if stop {
			break
		}
		select {
		case p.Input() <- saramaRecord(topic, i, s.startTs):
		case <-timer.C:
			mu.Lock()
			first = fmt.Errorf("produce: records not taken within %v", s.timeout)
			mu.Unlock()
			break sending
		}
	}
	p.AsyncClose() // flushes what is buffered, then closes Successes and Errors
	wg.Wait()
	if first != nil {
		logf("produce: %d records failed (sending stops at the first failure)", failed)
		return 0, first
	}
	return exitOK, nil
}

// consume: no group; a partition consumer per partition from the oldest offset. Sarama does
// not tell a record's timestamp type (its ConsumerMessage has none): timestamp_type is null.
func (saramaLib) consume(o options) (int, error) {
	s := consumeOptions(o)
	topic := o.required("topic")
	cfg, err := saramaConfig(o)
	if err != nil {
		return 0, err
	}
	if s.committed {
		cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	}
	c, err := sarama.NewConsumer(brokers(o), cfg)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	parts, err := c.Partitions(topic)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	msgs := make(chan *sarama.ConsumerMessage)
	for _, part := range parts {
		pc, err := c.ConsumePartition(topic, part, sarama.OffsetOldest)
		if err != nil {
			return 0, err
		}
		defer pc.AsyncClose()
		go func() {
			for m := range pc.Messages() {
				select {
				case msgs <- m:
				case <-ctx.Done():
					return
				}
			}
		}()
		go func() {
			for e := range pc.Errors() {
				logf("consume: %v", e)
			}
		}()
	}
	seen := 0
	for seen < s.expect {
		select {
		case m := <-msgs:
			seen++
			printLine(consumedLine(m.Partition, m.Offset, m.Key, m.Value, saramaHeaders(m),
				m.Timestamp.UnixMilli(), nil))
		case <-ctx.Done():
			logf("consume: timed out with %d of %d records", seen, s.expect)
			return exitFailed, nil
		}
	}
	return exitOK, nil
}

func saramaHeaders(m *sarama.ConsumerMessage) [][2][]byte {
	hs := make([][2][]byte, 0, len(m.Headers))
	for _, h := range m.Headers {
		hs = append(hs, [2][]byte{h.Key, h.Value})
	}
	return hs
}

// offsetsForTimes: Client.GetOffset with the timestamp for each partition (ListOffsets); -1
// where no record is at or after it.
func (saramaLib) offsetsForTimes(o options) (int, error) {
	topic, ts := o.required("topic"), o.int64("timestamp", 0)
	cfg, err := saramaConfig(o)
	if err != nil {
		return 0, err
	}
	cl, err := sarama.NewClient(brokers(o), cfg)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	parts, err := cl.Partitions(topic)
	if err != nil {
		return 0, err
	}
	out := map[string]int64{}
	for _, p := range parts {
		off, err := cl.GetOffset(topic, p, ts)
		if err != nil {
			return 0, err
		}
		out[strconv.Itoa(int(p))] = off
	}
	printLine(out)
	return exitOK, nil
}
