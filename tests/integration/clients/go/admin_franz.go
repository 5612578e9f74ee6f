package main

import (
	"context"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// admin: kadm, franz-go's admin client. What kadm has of the contract's actions, plus
// delete-topic and list-groups; the others exit 3.
func (franz) admin(action string, o options) (int, error) {
	actions := map[string]func(context.Context, *kadm.Client, *kgo.Client, options) error{
		"describe-cluster":  franzDescribeCluster,
		"describe-topics":   franzDescribeTopics,
		"list-offsets":      franzListOffsets,
		"create-partitions": franzCreatePartitions,
		"delete-records":    franzDeleteRecords,
		"describe-configs":  franzDescribeConfigs,
		"alter-configs":     franzAlterConfigs,
		"delete-topic":      franzDeleteTopic,
		"list-groups":       franzListGroups,
	}
	fn, ok := actions[action]
	if !ok {
		return 0, unsupported("kadm: no admin action %s here", action)
	}
	adm, cl, err := franzAdmin(o)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	ctx, cancel := deadline(o, 60)
	defer cancel()
	return exitOK, fn(ctx, adm, cl, o)
}

func franzDescribeCluster(ctx context.Context, adm *kadm.Client, _ *kgo.Client, _ options) error {
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return err
	}
	brokers := []any{}
	for _, b := range md.Brokers {
		var rack any
		if b.Rack != nil {
			rack = *b.Rack
		}
		brokers = append(brokers, map[string]any{"id": b.NodeID, "host": b.Host, "port": b.Port,
			"rack": rack})
	}
	var controller any = md.Controller
	if md.Controller < 0 {
		controller = nil
	}
	printLine(map[string]any{"cluster_id": md.Cluster, "controller": controller,
		"brokers": brokers})
	return nil
}

// franzDescribeTopics: kadm's ListTopics (Metadata).
func franzDescribeTopics(ctx context.Context, adm *kadm.Client, _ *kgo.Client, o options) error {
	names := splitTopics(o.required("topic"))
	details, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return err
	}
	for _, t := range names {
		d, ok := details[t]
		if !ok || d.Err != nil {
			err := d.Err
			if !ok {
				err = kerr.UnknownTopicOrPartition
			}
			printLine(map[string]any{"topic": t, "error": errorName(err)})
			continue
		}
		parts := []any{}
		for _, p := range d.Partitions.Sorted() {
			parts = append(parts, partitionLine(p.Partition, p.Leader, p.Replicas, p.ISR))
		}
		printLine(map[string]any{"topic": t, "error": nil, "topic_id": topicID(d.ID),
			"internal": d.IsInternal, "partitions": parts})
	}
	return nil
}

func franzListOffsets(ctx context.Context, adm *kadm.Client, _ *kgo.Client, o options) error {
	topic := o.required("topic")
	start, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = start.Error()
	}
	if err != nil {
		return err
	}
	end, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = end.Error()
	}
	if err != nil {
		return err
	}
	parts := map[string]any{}
	for p, s := range start[topic] {
		parts[itoa(int(p))] = map[string]any{"earliest": s.Offset, "latest": end[topic][p].Offset}
	}
	printLine(map[string]any{"topic": topic, "partitions": parts})
	return nil
}

// franzCreatePartitions: kadm's UpdatePartitions (or ValidateUpdatePartitions) to --count; kadm
// has no explicit replica assignment, so --assignments sends kgo's CreatePartitionsRequest.
func franzCreatePartitions(ctx context.Context, adm *kadm.Client, cl *kgo.Client, o options) error {
	topic, count := o.required("topic"), o.int("count", -1)
	assign, err := assignments(o)
	if err != nil {
		return err
	}
	validate := o.flag("validate-only")
	if assign != nil {
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.ValidateOnly = validate
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = topic, int32(count)
		for _, replicas := range assign {
			a := kmsg.NewCreatePartitionsRequestTopicAssignment()
			a.Replicas = replicas
			rt.Assignment = append(rt.Assignment, a)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		printLine(map[string]any{"topic": topic, "error": nullable(codeName(resp.Topics[0].ErrorCode))})
		return nil
	}
	update := adm.UpdatePartitions
	if validate {
		update = adm.ValidateUpdatePartitions
	}
	res, err := update(ctx, count, topic)
	if err != nil {
		return err
	}
	r, err := res.On(topic, nil)
	if err == nil {
		err = r.Err
	}
	printLine(map[string]any{"topic": topic, "error": nullable(errorName(err))})
	return nil
}

func franzDeleteRecords(ctx context.Context, adm *kadm.Client, _ *kgo.Client, o options) error {
	topic := o.required("topic")
	offsets, err := partitionOffsets(o.required("offsets"))
	if err != nil {
		return err
	}
	req := kadm.Offsets{topic: {}}
	for p, at := range offsets {
		req[topic][p] = kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: -1}
	}
	res, err := adm.DeleteRecords(ctx, req)
	if err != nil {
		return err
	}
	for _, p := range sortedPartitions(offsets) {
		r, _ := res.Lookup(topic, p)
		var low any = r.LowWatermark
		if r.Err != nil {
			low = nil
		}
		printLine(map[string]any{"topic": topic, "partition": p, "error": nullable(errorName(r.Err)),
			"low_watermark": low})
	}
	return nil
}

// franzDescribeConfigs: kadm's DescribeTopicConfigs / DescribeBrokerConfigs (no id: the
// cluster-wide default). kadm keeps neither read_only nor types nor documentation (null), and
// has no broker-logger resource (exit 3).
func franzDescribeConfigs(ctx context.Context, adm *kadm.Client, _ *kgo.Client, o options) error {
	kind, name := configResource(o)
	var res kadm.ResourceConfigs
	var err error
	switch kind {
	case "topic":
		res, err = adm.DescribeTopicConfigs(ctx, name)
	case "broker":
		var ids []int32
		if name != "" {
			id, err := brokerID(name)
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		res, err = adm.DescribeBrokerConfigs(ctx, ids...)
	default:
		return unsupported("kadm has no %s config resource", kind)
	}
	if err != nil {
		return err
	}
	rc, err := res.On(name, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		printLine(adminResult(kind, name, err))
		return nil
	}
	configs := map[string]any{}
	for _, c := range rc.Configs {
		synonyms := [][]any{}
		for _, s := range c.Synonyms {
			var v any
			if s.Value != nil {
				v = *s.Value
			}
			synonyms = append(synonyms, []any{s.Key, v, enumName(configSources, int(s.Source))})
		}
		configs[c.Key] = configLine(c.Value, int(c.Source), nil, c.Sensitive, synonyms, nil, nil)
	}
	line := adminResult(kind, name, nil)
	line["configs"] = configs
	printLine(line)
	return nil
}

var franzOps = map[string]kadm.IncrementalOp{"set": kadm.SetConfig, "delete": kadm.DeleteConfig,
	"append": kadm.AppendConfig, "subtract": kadm.SubtractConfig}

// franzAlterConfigs: kadm's Alter{Topic,Broker}Configs (IncrementalAlterConfigs), with
// --legacy true the ...State variants (AlterConfigs), Validate... with --validate-only.
func franzAlterConfigs(ctx context.Context, adm *kadm.Client, _ *kgo.Client, o options) error {
	kind, name := configResource(o)
	var alters []kadm.AlterConfig
	for _, a := range alterations(o) {
		ac := kadm.AlterConfig{Op: franzOps[a.op], Name: a.name}
		if a.op != "delete" {
			ac.Value = &a.value
		}
		alters = append(alters, ac)
	}
	legacy, validate := o.flag("legacy"), o.flag("validate-only")
	var res kadm.AlterConfigsResponses
	var err error
	switch kind {
	case "topic":
		fn := map[[2]bool]func(context.Context, []kadm.AlterConfig, ...string) (kadm.AlterConfigsResponses, error){
			{false, false}: adm.AlterTopicConfigs, {false, true}: adm.ValidateAlterTopicConfigs,
			{true, false}: adm.AlterTopicConfigsState, {true, true}: adm.ValidateAlterTopicConfigsState,
		}[[2]bool{legacy, validate}]
		res, err = fn(ctx, alters, name)
	case "broker":
		fn := map[[2]bool]func(context.Context, []kadm.AlterConfig, ...int32) (kadm.AlterConfigsResponses, error){
			{false, false}: adm.AlterBrokerConfigs, {false, true}: adm.ValidateAlterBrokerConfigs,
			{true, false}: adm.AlterBrokerConfigsState, {true, true}: adm.ValidateAlterBrokerConfigsState,
		}[[2]bool{legacy, validate}]
		var ids []int32
		if name != "" {
			id, err := brokerID(name)
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		res, err = fn(ctx, alters, ids...)
	default:
		return unsupported("kadm has no %s config resource", kind)
	}
	if err != nil {
		return err
	}
	r, err := res.On(name, nil)
	if err == nil {
		err = r.Err
	}
	printLine(adminResult(kind, name, err))
	return nil
}

// franzDeleteTopic: kadm's DeleteTopics; prints {"topic", "error"}.
func franzDeleteTopic(ctx context.Context, adm *kadm.Client, _ *kgo.Client, o options) error {
	topic := o.required("topic")
	res, err := adm.DeleteTopics(ctx, topic)
	if err != nil {
		return err
	}
	r, err := res.On(topic, nil)
	if err == nil {
		err = r.Err
	}
	printLine(map[string]any{"topic": topic, "error": nullable(errorName(err))})
	return nil
}

// franzListGroups: kadm's ListGroups (ListGroups v5: type and state of each group).
func franzListGroups(ctx context.Context, adm *kadm.Client, _ *kgo.Client, _ options) error {
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		return err
	}
	groups := []any{}
	for _, g := range listed.Sorted() {
		groups = append(groups, groupListLine(g.Group, g.State, g.GroupType, g.ProtocolType))
	}
	printLine(map[string]any{"error": nil, "groups": groups})
	return nil
}
