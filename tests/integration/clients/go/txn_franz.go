package main

import (
	"context"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func franzEnd(how string) kgo.TransactionEndTry {
	return kgo.TransactionEndTry(how == "commit")
}

// txnProduce: kgo's transactional producer (BeginTransaction, Produce, Flush, EndTransaction).
func (franz) txnProduce(o options) (int, error) {
	s := txnProduceOptions(o)
	cl, err := franzClient(o, kgo.TransactionalID(s.id), kgo.RecordDeliveryTimeout(s.timeout),
		kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	for k := 0; k < s.batches; k++ {
		first, end := s.bounds(k)
		if err := cl.BeginTransaction(); err != nil {
			return 0, err
		}
		var rs []*kgo.Record
		for i := first; i < end; i++ {
			rs = append(rs, franzRecord(s.topic, i, s.startTs))
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			return 0, err
		}
		s.hold.await(k)
		how := s.ends[k%len(s.ends)]
		if err := cl.EndTransaction(ctx, franzEnd(how)); err != nil {
			return 0, err
		}
		txnEvent(how, k, first, end)
	}
	return exitOK, nil
}

// txnCopy: a GroupTransactSession, kgo's consume-transform-produce loop: End commits the
// offsets of what was polled with the records (TxnOffsetCommit with the group's generation and
// member id), or aborts and rewinds the consumer to the committed offsets itself. A commit
// End turns into an abort (e.g. a rebalance) is printed as the abort it was.
func (franz) txnCopy(o options) (int, error) {
	c := newCopyState(txnCopyOptions(o))
	opts, err := franzClientOpts(o,
		kgo.TransactionalID(c.id), kgo.ConsumerGroup(c.group), kgo.ConsumeTopics(c.topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.RecordDeliveryTimeout(c.timeout),
	)
	if err != nil {
		return 0, err
	}
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		return 0, err
	}
	defer sess.Close()
	for !c.done() {
		ctx, cancel := context.WithTimeout(context.Background(),
			min(500*time.Millisecond, time.Until(c.deadline)))
		fetches := sess.PollRecords(ctx, c.batch)
		cancel()
		var failed error
		fetches.EachError(func(t string, p int32, err error) {
			if ctx.Err() == nil {
				logf("txn-copy: %s/%d: %v", t, p, err)
				failed = err
			}
		})
		if failed != nil && !isKafkaError(failed) {
			return 0, failed
		}
		records := fetches.Records()
		if len(records) == 0 {
			continue
		}
		c.last = time.Now()
		if err := sess.Begin(); err != nil {
			return 0, err
		}
		offsets := map[int32]int64{}
		keys := []any{}
		var copies []*kgo.Record
		for _, r := range records {
			src := strconv.Itoa(int(r.Partition)) + ":" + strconv.FormatInt(r.Offset, 10)
			copies = append(copies, &kgo.Record{Topic: c.output, Key: r.Key, Value: r.Value,
				Headers: []kgo.RecordHeader{{Key: "src", Value: []byte(src)}}})
			offsets[r.Partition] = r.Offset + 1
			keys = append(keys, latin1(r.Key))
		}
		ctx, cancel = context.WithTimeout(context.Background(), c.timeout)
		err := sess.ProduceSync(ctx, copies...).FirstErr()
		cancel()
		if err != nil {
			return 0, err
		}
		c.hold.await(c.txn)
		want := c.ends[c.txn%len(c.ends)]
		ctx, cancel = context.WithTimeout(context.Background(), c.timeout)
		committed, err := sess.End(ctx, franzEnd(want))
		cancel()
		if err != nil {
			return 0, err
		}
		how := "abort"
		if committed {
			how = "commit"
		}
		c.ended(how, len(records), offsets, keys)
	}
	return c.closed(), nil
}

// txnFence: producer A (transactional id ID) sends key-0 in a transaction; producer B with the
// same id initializes (kgo does InitProducerId with its first transactional send), sends key-1
// and commits; A, fenced, sends key-2 and tries to commit.
func (franz) txnFence(o options) (int, error) {
	topic, id := o.required("topic"), o.required("transactional-id")
	startTs := time.Now().UnixMilli()
	ctx, cancel := deadline(o, 60)
	defer cancel()
	a, err := franzClient(o, kgo.TransactionalID(id))
	if err != nil {
		return 0, err
	}
	defer a.Close()
	if err := a.BeginTransaction(); err != nil {
		return 0, err
	}
	fenceEvent("begin", "A", nil)
	if err := a.ProduceSync(ctx, franzRecord(topic, 0, startTs)).FirstErr(); err != nil {
		return 0, err
	}
	fenceEvent("sent", "A", map[string]any{"key": "key-0"})
	b, err := franzClient(o, kgo.TransactionalID(id))
	if err != nil {
		return 0, err
	}
	defer b.Close()
	if err := b.BeginTransaction(); err != nil {
		return 0, err
	}
	if err := b.ProduceSync(ctx, franzRecord(topic, 1, startTs)).FirstErr(); err != nil {
		return 0, err
	}
	fenceEvent("init", "B", nil) // its send needed InitProducerId first, which fenced A
	if err := b.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return 0, err
	}
	fenceEvent("commit", "B", map[string]any{"key": "key-1"})
	stage := "send"
	err = a.ProduceSync(ctx, franzRecord(topic, 2, startTs)).FirstErr()
	if err == nil {
		stage = "commit"
		err = a.EndTransaction(ctx, kgo.TryCommit)
	}
	if err == nil {
		return notFenced(), nil
	}
	logf("txn-fence: A failed at %s: %v", stage, err)
	fenceEvent("fenced", "A", map[string]any{"stage": stage, "error": errorName(err)})
	return exitOK, nil
}
