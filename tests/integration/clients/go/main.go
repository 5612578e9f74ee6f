// Command rafka-go-driver drives a broker with a real Go Kafka client, franz-go (kgo + kadm)
// or IBM Sarama, under the command-line contract of ../README.md: stdout carries JSON lines
// only, everything else goes to stderr; exit codes as in ../drivers.py.
//
//	rafka-go-driver franz|sarama <command> --bootstrap B [options]
//
// One file per concern, each with a franz-go and a Sarama half where the libraries differ:
//
//	main.go       dispatch on the library and the command
//	options.go    --name value options
//	output.go     JSON lines, events, Kafka error names, the contract's error line
//	records.go    the reference records every driver produces
//	security.go   $RAFKA_CLIENT_SECURITY as each library's settings
//	clients.go    the client settings every command shares (bootstrap, logging, version)
//	produce_*.go  create-topic, produce, consume, offsets-for-times
//	groups*.go    group-consume, describe-group, committed, commit
//	txn*.go       txn-produce, txn-copy, txn-fence
//	admin*.go     admin <action>
package main

import (
	"errors"
	"fmt"
	"os"
)

// Exit codes shared by all drivers (../drivers.py).
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitUnsupported = 3
	exitTopicExists = 4
)

// library is one Go client; every command returns the process's exit code, or an error that
// ends the run with the contract's error line and exit 1.
type library interface {
	createTopic(o options) (int, error)
	produce(o options) (int, error)
	consume(o options) (int, error)
	offsetsForTimes(o options) (int, error)
	groupConsume(o options) (int, error)
	describeGroup(o options) (int, error)
	committed(o options) (int, error)
	commit(o options) (int, error)
	txnProduce(o options) (int, error)
	txnCopy(o options) (int, error)
	txnFence(o options) (int, error)
	admin(action string, o options) (int, error)
}

var libraries = map[string]library{"franz": franz{}, "sarama": saramaLib{}}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(argv []string) int {
	if len(argv) < 2 {
		return usage("missing library or command")
	}
	lib, ok := libraries[argv[0]]
	if !ok {
		return usage("unknown library " + argv[0])
	}
	command, rest := argv[1], argv[2:]
	var action string
	if command == "admin" {
		if len(rest) == 0 {
			return usage("admin: missing action")
		}
		action, rest = rest[0], rest[1:]
	}
	o, err := parseOptions(rest)
	if err != nil {
		return usage(err.Error())
	}
	commands := map[string]func(options) (int, error){
		"create-topic":      lib.createTopic,
		"produce":           lib.produce,
		"consume":           lib.consume,
		"offsets-for-times": lib.offsetsForTimes,
		"group-consume":     lib.groupConsume,
		"describe-group":    lib.describeGroup,
		"committed":         lib.committed,
		"commit":            lib.commit,
		"txn-produce":       lib.txnProduce,
		"txn-copy":          lib.txnCopy,
		"txn-fence":         lib.txnFence,
		"admin":             func(o options) (int, error) { return lib.admin(action, o) },
	}
	fn, ok := commands[command]
	if !ok {
		if command == "produce-stream" || command == "share-consume" {
			fmt.Fprintf(os.Stderr, "%s: the Go drivers have no %s\n", argv[0], command)
			return exitUnsupported
		}
		return usage("unknown command " + command)
	}
	rc, err := call(fn, o)
	var bad usageError
	switch {
	case errors.As(err, &bad):
		return usage(bad.Error())
	case errors.Is(err, errUnsupported):
		fmt.Fprintf(os.Stderr, "%s %s: %v\n", argv[0], command, err)
		return exitUnsupported
	case err != nil:
		if command != "group-consume" { // it has reported a fatal error event itself
			errorLine(err)
		}
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		return exitFailed
	}
	return rc
}

// call runs a command; a panic with a usage or unsupported error (options.required and friends,
// checks deep in option parsing) becomes its error.
func call(fn func(options) (int, error), o options) (rc int, err error) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(error)
			var bad usageError
			if !ok || !(errors.As(e, &bad) || errors.Is(e, errUnsupported)) {
				panic(r)
			}
			rc, err = exitFailed, e
		}
	}()
	return fn(o)
}

func usage(why string) int {
	fmt.Fprintln(os.Stderr, "usage: rafka-go-driver <franz|sarama> <create-topic|produce|consume|"+
		"offsets-for-times|group-consume|describe-group|committed|commit|txn-produce|txn-copy|"+
		"txn-fence|admin <action>> --bootstrap B ...  ("+why+")")
	return exitUsage
}
