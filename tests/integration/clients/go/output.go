package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
)

var stdout sync.Mutex // Sarama's claims run on goroutines of their own

// printLine writes one JSON value on a line of its own, in ASCII (every other character
// \u-escaped, U+0085 and friends included, so that a reader may split lines anywhere).
func printLine(v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // only maps, slices, strings, numbers, booleans and nil are printed
	}
	var out strings.Builder
	for _, r := range buf.String() {
		switch {
		case r < 0x80:
			out.WriteRune(r)
		case r > 0xFFFF:
			r -= 0x10000
			fmt.Fprintf(&out, `\u%04x\u%04x`, 0xD800+(r>>10), 0xDC00+(r&0x3FF))
		default:
			fmt.Fprintf(&out, `\u%04x`, r)
		}
	}
	stdout.Lock()
	defer stdout.Unlock()
	os.Stdout.WriteString(out.String())
}

func nowMs() int64 { return time.Now().UnixMilli() }

// event prints {"event": kind, ...fields, "t": now}.
func event(kind string, fields map[string]any) {
	line := map[string]any{"event": kind, "t": nowMs()}
	for k, v := range fields {
		line[k] = v
	}
	printLine(line)
}

// latin1 prints binary data as a string of one character per byte (nil stays null).
func latin1(b []byte) any {
	if b == nil {
		return nil
	}
	rs := make([]rune, len(b))
	for i, c := range b {
		rs[i] = rune(c)
	}
	return string(rs)
}

// errorName is Kafka's protocol name of an error when it carries one (franz-go's kerr, Sarama's
// KError), TIMEOUT for a deadline, else the Go type of the innermost error.
func errorName(err error) string {
	if err == nil {
		return ""
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	var se sarama.KError
	if errors.As(err, &se) {
		return codeName(int16(se))
	}
	if code := saramaWrapped(err); code != 0 {
		return codeName(code)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "TIMEOUT"
	}
	for {
		next := errors.Unwrap(err)
		if next == nil {
			break
		}
		err = next
	}
	return strings.TrimPrefix(reflect.TypeOf(err).String(), "*")
}

// isKafkaError: the error is one of Kafka's protocol errors (a broker's answer).
func isKafkaError(err error) bool {
	var ke *kerr.Error
	var se sarama.KError
	return errors.As(err, &ke) || errors.As(err, &se) || saramaWrapped(err) != 0
}

// saramaWrapped: the code of a broker's error that Sarama wrapped with its message
// (sarama.Wrap: a sentinelError, whose Unwrap gives the message, so only errors.Is finds the
// KError); 0 if none.
func saramaWrapped(err error) int16 {
	for code := int16(1); code < 256; code++ {
		if errors.Is(err, sarama.KError(code)) {
			return code
		}
	}
	return 0
}

// codeName: Kafka's name of an error code (franz-go's table serves both libraries).
func codeName(code int16) string {
	if code == 0 {
		return ""
	}
	if e := kerr.ErrorForCode(code); e != nil {
		var ke *kerr.Error
		if errors.As(e, &ke) {
			return ke.Message
		}
	}
	return "UNKNOWN_ERROR_CODE_" + strconv.Itoa(int(code))
}

// nullable: "" as JSON null (error names).
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// errorLine: the contract's error line, Kafka's error name and the message.
func errorLine(err error) {
	printLine(map[string]any{"error": errorName(err), "message": err.Error()})
}

// offsetsJSON: {"p": o} with partitions as keys.
func offsetsJSON(offsets map[int32]int64) map[string]int64 {
	out := make(map[string]int64, len(offsets))
	for p, o := range offsets {
		out[strconv.Itoa(int(p))] = o
	}
	return out
}

func sortedInt32(set map[int32]bool) []int32 {
	out := make([]int32, 0, len(set))
	for p, in := range set {
		if in {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func itoa(n int) string { return strconv.Itoa(n) }
