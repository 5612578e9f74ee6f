package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// usageError: bad command-line input (exit 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func badUsage(format string, args ...any) error {
	return usageError{fmt.Sprintf(format, args...)}
}

// errUnsupported: the client cannot do what was asked (exit 3); wrap it with the reason.
var errUnsupported = errors.New("the client cannot do this")

func unsupported(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUnsupported, fmt.Sprintf(format, args...))
}

// options are the "--name value" pairs after the command; a name may repeat (admin's --set,
// --delete, ...), the last one counts where one value is asked for.
type options map[string][]string

func parseOptions(args []string) (options, error) {
	o := options{}
	for i := 0; i < len(args); i += 2 {
		if !strings.HasPrefix(args[i], "--") || i+1 >= len(args) {
			return nil, badUsage("bad option %s", args[i])
		}
		name := args[i][2:]
		o[name] = append(o[name], args[i+1])
	}
	return o, nil
}

func (o options) has(name string) bool { return len(o[name]) > 0 }

func (o options) str(name, def string) string {
	if v := o[name]; len(v) > 0 {
		return v[len(v)-1]
	}
	return def
}

func (o options) list(name string) []string { return o[name] }

// required panics with a usageError: the command ends with exit 2 (see recoverUsage).
func (o options) required(name string) string {
	if !o.has(name) {
		panic(badUsage("missing --%s", name))
	}
	return o.str(name, "")
}

func (o options) int(name string, def int) int {
	if !o.has(name) {
		return def
	}
	n, err := strconv.Atoi(o.str(name, ""))
	if err != nil {
		panic(badUsage("--%s: %v", name, err))
	}
	return n
}

func (o options) int64(name string, def int64) int64 {
	if !o.has(name) {
		return def
	}
	n, err := strconv.ParseInt(o.str(name, ""), 10, 64)
	if err != nil {
		panic(badUsage("--%s: %v", name, err))
	}
	return n
}

func (o options) float(name string, def float64) float64 {
	if !o.has(name) {
		return def
	}
	f, err := strconv.ParseFloat(o.str(name, ""), 64)
	if err != nil {
		panic(badUsage("--%s: %v", name, err))
	}
	return f
}

// seconds: a duration option given in seconds (fractions allowed).
func (o options) seconds(name string, def float64) time.Duration {
	return time.Duration(o.float(name, def) * float64(time.Second))
}

func (o options) flag(name string) bool { return o.str(name, "false") == "true" }

// timeout: --timeout (seconds), default 60 (consume: 30).
func (o options) timeout(def float64) time.Duration { return o.seconds("timeout", def) }

// oneOf: the option's value, which must be one of allowed (the first is the default).
func (o options) oneOf(name string, allowed ...string) string {
	v := o.str(name, allowed[0])
	for _, a := range allowed {
		if v == a {
			return v
		}
	}
	panic(badUsage("bad --%s %s", name, v))
}

// partitionOffsets parses "P:O[,P:O...]".
func partitionOffsets(spec string) (map[int32]int64, error) {
	out := map[int32]int64{}
	for _, item := range strings.Split(spec, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		p, off, ok := strings.Cut(item, ":")
		pn, err1 := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
		on, err2 := strconv.ParseInt(strings.TrimSpace(off), 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, badUsage("bad partition:offset %q", item)
		}
		out[int32(pn)] = on
	}
	return out, nil
}

// int32List parses "1,2,3".
func int32List(spec string) ([]int32, error) {
	var out []int32
	for _, x := range strings.Split(spec, ",") {
		if strings.TrimSpace(x) == "" {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 32)
		if err != nil {
			return nil, badUsage("bad number %q", x)
		}
		out = append(out, int32(n))
	}
	return out, nil
}
