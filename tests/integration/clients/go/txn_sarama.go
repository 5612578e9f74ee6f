package main

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// saramaTxnConfig: a transactional producer's config (idempotent, acks=all, one request in
// flight per broker, as Sarama requires).
func saramaTxnConfig(o options, id string, timeout time.Duration) (*sarama.Config, error) {
	cfg, err := saramaConfig(o)
	if err != nil {
		return nil, err
	}
	cfg.Producer.Transaction.ID = id
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.Timeout = min(timeout/2, 30*time.Second)
	cfg.Producer.Retry.Max = 10
	cfg.Producer.Retry.Backoff = 200 * time.Millisecond
	return cfg, nil
}

func saramaEnd(p sarama.SyncProducer, how string) error {
	if how == "commit" {
		return p.CommitTxn()
	}
	return p.AbortTxn()
}

// txnProduce: Sarama's transactional SyncProducer (BeginTxn, SendMessages, CommitTxn/AbortTxn).
func (saramaLib) txnProduce(o options) (int, error) {
	s := txnProduceOptions(o)
	cfg, err := saramaTxnConfig(o, s.id, s.timeout)
	if err != nil {
		return 0, err
	}
	p, err := sarama.NewSyncProducer(brokers(o), cfg) // InitProducerId
	if err != nil {
		return 0, err
	}
	defer p.Close()
	for k := 0; k < s.batches; k++ {
		first, end := s.bounds(k)
		if err := p.BeginTxn(); err != nil {
			return 0, err
		}
		var msgs []*sarama.ProducerMessage
		for i := first; i < end; i++ {
			msgs = append(msgs, saramaRecord(s.topic, i, s.startTs))
		}
		if err := saramaSendAll(p, msgs); err != nil {
			return 0, err
		}
		s.hold.await(k)
		how := s.ends[k%len(s.ends)]
		if err := saramaEnd(p, how); err != nil {
			return 0, err
		}
		txnEvent(how, k, first, end)
	}
	return exitOK, nil
}

// saramaSendAll: SendMessages, its first failure as the error (ProducerErrors wrap them).
func saramaSendAll(p sarama.SyncProducer, msgs []*sarama.ProducerMessage) error {
	err := p.SendMessages(msgs)
	var errs sarama.ProducerErrors
	if errors.As(err, &errs) && len(errs) > 0 {
		return errs[0].Err
	}
	return err
}

// saramaCopier is txn-copy on Sarama: a ConsumerGroup (read_committed, no auto-commit) and a
// transactional SyncProducer. Each claim's goroutine takes up to --batch records at a time
// (what its channel holds) and copies them in a transaction of their own (one at a time), with
// AddOffsetsToTxnWithGroupMetadata of the session's member id and generation. A claim cannot
// seek, so after an abort the session is left and joined again: the new claims start from the
// committed offsets, and the aborted records come again.
type saramaCopier struct {
	*copyState
	p       sarama.SyncProducer
	mu      sync.Mutex // one transaction at a time
	restart func()     // ends the session (Consume's context)
	fatal   error
}

func (c *saramaCopier) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (c *saramaCopier) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (c *saramaCopier) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		var batch []*sarama.ConsumerMessage
		select {
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			batch = append(batch, m)
		case <-s.Context().Done():
			return nil
		}
	more:
		for len(batch) < c.batch {
			select {
			case m, ok := <-claim.Messages():
				if !ok {
					break more
				}
				batch = append(batch, m)
			default:
				break more
			}
		}
		if !c.copyBatch(s, batch) {
			return nil
		}
	}
}

// copyBatch: one transaction; false when the session is to end (an abort, done, a failure).
func (c *saramaCopier) copyBatch(s sarama.ConsumerGroupSession, batch []*sarama.ConsumerMessage) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.Context().Err() != nil || c.fatal != nil || c.done() {
		return false
	}
	c.last = time.Now()
	if err := c.transaction(s, batch); err != nil {
		c.fatal = err
		c.restart()
		return false
	}
	if c.done() || c.ends[(c.txn-1)%len(c.ends)] == "abort" {
		c.restart()
		return false
	}
	return true
}

func (c *saramaCopier) transaction(s sarama.ConsumerGroupSession, batch []*sarama.ConsumerMessage) error {
	if err := c.p.BeginTxn(); err != nil {
		return err
	}
	offsets := map[int32]int64{}
	keys := []any{}
	var copies []*sarama.ProducerMessage
	for _, m := range batch {
		src := strconv.Itoa(int(m.Partition)) + ":" + strconv.FormatInt(m.Offset, 10)
		copies = append(copies, &sarama.ProducerMessage{Topic: c.output,
			Key: sarama.ByteEncoder(m.Key), Value: sarama.ByteEncoder(m.Value),
			Headers: []sarama.RecordHeader{{Key: []byte("src"), Value: []byte(src)}}})
		offsets[m.Partition] = m.Offset + 1
		keys = append(keys, latin1(m.Key))
	}
	if err := saramaSendAll(c.p, copies); err != nil {
		return err
	}
	var parts []*sarama.PartitionOffsetMetadata
	for _, p := range sortedPartitions(offsets) {
		parts = append(parts, &sarama.PartitionOffsetMetadata{Partition: p, Offset: offsets[p],
			LeaderEpoch: -1})
	}
	md := sarama.NewConsumerGroupMetadataFromSession(s, c.group, nil)
	if err := c.p.AddOffsetsToTxnWithGroupMetadata(map[string][]*sarama.PartitionOffsetMetadata{
		c.topic: parts}, md); err != nil {
		return err
	}
	c.hold.await(c.txn)
	how := c.ends[c.txn%len(c.ends)]
	if err := saramaEnd(c.p, how); err != nil {
		return err
	}
	c.ended(how, len(batch), offsets, keys)
	return nil
}

func (saramaLib) txnCopy(o options) (int, error) {
	c := &saramaCopier{copyState: newCopyState(txnCopyOptions(o))}
	pcfg, err := saramaTxnConfig(o, c.id, c.timeout)
	if err != nil {
		return 0, err
	}
	if c.p, err = sarama.NewSyncProducer(brokers(o), pcfg); err != nil {
		return 0, err
	}
	defer c.p.Close()
	cfg, err := saramaConfig(o)
	if err != nil {
		return 0, err
	}
	cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cg, err := sarama.NewConsumerGroup(brokers(o), c.group, cfg)
	if err != nil {
		return 0, err
	}
	defer cg.Close()
	for {
		c.mu.Lock()
		stop := c.fatal != nil || c.done()
		c.mu.Unlock()
		if stop {
			break
		}
		ctx, cancel := context.WithCancel(context.Background())
		c.mu.Lock()
		c.restart = cancel
		c.mu.Unlock()
		go func() { // the stop conditions while no record comes
			for ctx.Err() == nil {
				c.mu.Lock()
				if c.done() {
					cancel()
				}
				c.mu.Unlock()
				time.Sleep(100 * time.Millisecond)
			}
		}()
		err := cg.Consume(ctx, []string{c.topic}, c)
		cancel()
		if err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
			logf("txn-copy: %v", err)
			time.Sleep(200 * time.Millisecond)
		}
	}
	if c.fatal != nil {
		return 0, c.fatal
	}
	return c.closed(), nil
}

// txnFence: two SyncProducers with one transactional id; creating B (InitProducerId) fences A.
func (saramaLib) txnFence(o options) (int, error) {
	topic, id := o.required("topic"), o.required("transactional-id")
	startTs := time.Now().UnixMilli()
	cfg, err := saramaTxnConfig(o, id, o.timeout(60))
	if err != nil {
		return 0, err
	}
	a, err := sarama.NewSyncProducer(brokers(o), cfg)
	if err != nil {
		return 0, err
	}
	defer a.Close()
	if err := a.BeginTxn(); err != nil {
		return 0, err
	}
	fenceEvent("begin", "A", nil)
	if _, _, err := a.SendMessage(saramaRecord(topic, 0, startTs)); err != nil {
		return 0, err
	}
	fenceEvent("sent", "A", map[string]any{"key": "key-0"})
	bcfg, err := saramaTxnConfig(o, id, o.timeout(60))
	if err != nil {
		return 0, err
	}
	b, err := sarama.NewSyncProducer(brokers(o), bcfg)
	if err != nil {
		return 0, err
	}
	defer b.Close()
	fenceEvent("init", "B", nil)
	if err := b.BeginTxn(); err != nil {
		return 0, err
	}
	if _, _, err := b.SendMessage(saramaRecord(topic, 1, startTs)); err != nil {
		return 0, err
	}
	if err := b.CommitTxn(); err != nil {
		return 0, err
	}
	fenceEvent("commit", "B", map[string]any{"key": "key-1"})
	stage := "send"
	_, _, err = a.SendMessage(saramaRecord(topic, 2, startTs))
	if err == nil {
		stage = "commit"
		err = a.CommitTxn()
	}
	if err == nil {
		return notFenced(), nil
	}
	logf("txn-fence: A failed at %s: %v", stage, err)
	fenceEvent("fenced", "A", map[string]any{"stage": stage, "error": errorName(err)})
	return exitOK, nil
}
