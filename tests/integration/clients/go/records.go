package main

import (
	"fmt"
	"time"
)

const filler = "abcdefghijklmnopqrstuvwxyz0123456789"

// reference is record i as every driver produces it (drivers.record in ../drivers.py).
type reference struct {
	key, value []byte
	headers    [][2][]byte // name, value
	timestamp  int64
}

func referenceRecord(i int, startTs int64) reference {
	value := []byte(fmt.Sprintf("value-%d-", i))
	for j := 0; j < (i*37)%200; j++ {
		value = append(value, filler[(i+j)%len(filler)])
	}
	return reference{
		key:   []byte(fmt.Sprintf("key-%d", i)),
		value: value,
		headers: [][2][]byte{
			{[]byte("h1"), []byte(fmt.Sprintf("v-%d", i))},
			{[]byte("h2"), {0x00, 0xff, byte(i % 256)}},
		},
		timestamp: startTs + int64(i),
	}
}

// consumedLine is what consume prints for one record.
func consumedLine(partition int32, offset int64, key, value []byte, headers [][2][]byte,
	timestamp int64, timestampType any) map[string]any {
	hs := make([]any, 0, len(headers))
	for _, h := range headers {
		hs = append(hs, []any{string(h[0]), latin1(h[1])})
	}
	return map[string]any{
		"partition": partition, "offset": offset, "key": latin1(key), "value": latin1(value),
		"headers": hs, "timestamp": timestamp, "timestamp_type": timestampType,
	}
}

const msDuration = time.Millisecond

func msTime(ms int64) time.Time { return time.UnixMilli(ms) }
