package main

import (
	"net"
	"strconv"

	"github.com/IBM/sarama"
)

// saramaAdmin: the ClusterAdmin over a Client (both used: the admin has no ListOffsets).
type saramaAdmin struct {
	cl  sarama.Client
	adm sarama.ClusterAdmin
	cfg *sarama.Config
}

// admin: Sarama's ClusterAdmin. What it has of the contract's actions, plus delete-topic and
// list-groups; the others exit 3.
func (saramaLib) admin(action string, o options) (int, error) {
	actions := map[string]func(saramaAdmin, options) error{
		"describe-cluster":  saramaDescribeCluster,
		"describe-topics":   saramaDescribeTopics,
		"list-offsets":      saramaListOffsets,
		"create-partitions": saramaCreatePartitions,
		"delete-records":    saramaDeleteRecords,
		"describe-configs":  saramaDescribeConfigs,
		"alter-configs":     saramaAlterConfigs,
		"delete-topic":      saramaDeleteTopic,
		"list-groups":       saramaListGroups,
	}
	fn, ok := actions[action]
	if !ok {
		return 0, unsupported("Sarama: no admin action %s here", action)
	}
	cfg, err := saramaConfig(o)
	if err != nil {
		return 0, err
	}
	cl, err := sarama.NewClient(brokers(o), cfg)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	adm, err := sarama.NewClusterAdminFromClient(cl)
	if err != nil {
		return 0, err
	}
	return exitOK, fn(saramaAdmin{cl, adm, cfg}, o)
}

// saramaDescribeCluster: DescribeCluster; the cluster id from a Metadata request of Sarama's
// protocol layer (neither its admin nor its client keeps it).
func saramaDescribeCluster(a saramaAdmin, _ options) error {
	brokers, controller, err := a.adm.DescribeCluster()
	if err != nil {
		return err
	}
	b := a.cl.LeastLoadedBroker()
	if b == nil {
		return sarama.ErrOutOfBrokers
	}
	md, err := b.GetMetadata(sarama.NewMetadataRequest(a.cfg.Version, []string{}))
	if err != nil {
		return err
	}
	var cluster any
	if md.ClusterID != nil {
		cluster = *md.ClusterID
	}
	lines := []map[string]any{}
	for _, b := range brokers {
		host, port, _ := net.SplitHostPort(b.Addr())
		p, _ := strconv.Atoi(port)
		var rack any
		if b.Rack() != "" {
			rack = b.Rack()
		}
		lines = append(lines, map[string]any{"id": b.ID(), "host": host, "port": p, "rack": rack})
	}
	sortByID(lines)
	var ctl any = controller
	if controller < 0 {
		ctl = nil
	}
	printLine(map[string]any{"cluster_id": cluster, "controller": ctl, "brokers": lines})
	return nil
}

func sortByID(lines []map[string]any) {
	for i := 1; i < len(lines); i++ {
		for j := i; j > 0 && lines[j]["id"].(int32) < lines[j-1]["id"].(int32); j-- {
			lines[j], lines[j-1] = lines[j-1], lines[j]
		}
	}
}

// saramaDescribeTopics: DescribeTopics (Metadata).
func saramaDescribeTopics(a saramaAdmin, o options) error {
	names := splitTopics(o.required("topic"))
	mds, err := a.adm.DescribeTopics(names)
	if err != nil {
		return err
	}
	for _, t := range mds {
		if t.Err != sarama.ErrNoError {
			printLine(map[string]any{"topic": t.Name, "error": errorName(t.Err)})
			continue
		}
		parts := map[int32]map[string]any{}
		for _, p := range t.Partitions {
			parts[p.ID] = partitionLine(p.ID, p.Leader, p.Replicas, p.Isr)
		}
		lines := []any{}
		for _, p := range sortedPartitions(parts) {
			lines = append(lines, parts[p])
		}
		printLine(map[string]any{"topic": t.Name, "error": nil, "topic_id": topicID(t.Uuid),
			"internal": t.IsInternal, "partitions": lines})
	}
	return nil
}

// saramaListOffsets: Client.GetOffset with OffsetOldest and OffsetNewest per partition.
func saramaListOffsets(a saramaAdmin, o options) error {
	topic := o.required("topic")
	parts, err := saramaPartitions(a.adm, topic)
	if err != nil {
		return err
	}
	out := map[string]any{}
	for _, p := range parts {
		first, err := a.cl.GetOffset(topic, p, sarama.OffsetOldest)
		if err != nil {
			return err
		}
		last, err := a.cl.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			return err
		}
		out[itoa(int(p))] = map[string]any{"earliest": first, "latest": last}
	}
	printLine(map[string]any{"topic": topic, "partitions": out})
	return nil
}

func saramaCreatePartitions(a saramaAdmin, o options) error {
	topic := o.required("topic")
	assign, err := assignments(o)
	if err != nil {
		return err
	}
	err = a.adm.CreatePartitions(topic, int32(o.int("count", -1)), assign, o.flag("validate-only"))
	if err != nil && !isKafkaError(err) {
		return err
	}
	printLine(map[string]any{"topic": topic, "error": nullable(errorName(err))})
	return nil
}

// saramaDeleteRecords: DeleteRecords answers with an error only: the low watermark printed is
// ListOffsets' earliest afterwards.
func saramaDeleteRecords(a saramaAdmin, o options) error {
	topic := o.required("topic")
	offsets, err := partitionOffsets(o.required("offsets"))
	if err != nil {
		return err
	}
	for _, p := range sortedPartitions(offsets) {
		err := a.adm.DeleteRecords(topic, map[int32]int64{p: offsets[p]})
		var low any
		if err == nil {
			first, err := a.cl.GetOffset(topic, p, sarama.OffsetOldest)
			if err != nil {
				return err
			}
			low = first
		} else if !isKafkaError(err) {
			return err
		}
		printLine(map[string]any{"topic": topic, "partition": p,
			"error": nullable(errorName(err)), "low_watermark": low})
	}
	return nil
}

var saramaResources = map[string]sarama.ConfigResourceType{"topic": sarama.TopicResource,
	"broker": sarama.BrokerResource, "broker-logger": sarama.BrokerLoggerResource}

// saramaDescribeConfigs: DescribeConfigs with synonyms and documentation. Sarama sends a broker
// resource to that broker, so the cluster-wide default (name "") is not reachable (exit 3).
func saramaDescribeConfigs(a saramaAdmin, o options) error {
	kind, name := configResource(o)
	if kind != "topic" && name == "" {
		return unsupported("Sarama sends a broker config resource to the broker it names")
	}
	res := &sarama.ConfigResource{Type: saramaResources[kind], Name: name}
	results, err := a.adm.DescribeConfigs([]*sarama.ConfigResource{res},
		sarama.DescribeConfigsOptions{IncludeSynonyms: true, IncludeDocumentation: true})
	if err != nil {
		return err
	}
	for _, r := range results {
		if r.ErrorCode != 0 {
			printLine(adminResult(kind, name, sarama.KError(r.ErrorCode)))
			continue
		}
		configs := map[string]any{}
		for _, c := range r.Configs {
			synonyms := [][]any{}
			for _, s := range c.Synonyms {
				synonyms = append(synonyms, []any{s.ConfigName, s.ConfigValue,
					enumName(configSources, int(s.Source))})
			}
			value := c.Value
			configs[c.Name] = configLine(&value, int(c.Source), c.ReadOnly, c.Sensitive, synonyms,
				enumName(configTypes, int(c.Type)), c.Documentation)
		}
		line := adminResult(kind, name, nil)
		line["configs"] = configs
		printLine(line)
	}
	return nil
}

var saramaOps = map[string]sarama.IncrementalAlterConfigsOperation{
	"set": sarama.IncrementalAlterConfigsOperationSet, "delete": sarama.IncrementalAlterConfigsOperationDelete,
	"append": sarama.IncrementalAlterConfigsOperationAppend, "subtract": sarama.IncrementalAlterConfigsOperationSubtract,
}

// saramaAlterConfigs: IncrementalAlterConfig, or with --legacy true AlterConfig.
func saramaAlterConfigs(a saramaAdmin, o options) error {
	kind, name := configResource(o)
	validate := o.flag("validate-only")
	var err error
	if o.flag("legacy") {
		entries := map[string]*string{}
		for _, x := range alterations(o) {
			entries[x.name] = &x.value
		}
		err = a.adm.AlterConfig(saramaResources[kind], name, entries, validate)
	} else {
		entries := map[string]sarama.IncrementalAlterConfigsEntry{}
		for _, x := range alterations(o) {
			e := sarama.IncrementalAlterConfigsEntry{Operation: saramaOps[x.op]}
			if x.op != "delete" {
				e.Value = &x.value
			}
			entries[x.name] = e
		}
		err = a.adm.IncrementalAlterConfig(saramaResources[kind], name, entries, validate)
	}
	if err != nil && !isKafkaError(err) {
		return err
	}
	printLine(adminResult(kind, name, err))
	return nil
}

func saramaDeleteTopic(a saramaAdmin, o options) error {
	topic := o.required("topic")
	err := a.adm.DeleteTopic(topic)
	if err != nil && !isKafkaError(err) {
		return err
	}
	printLine(map[string]any{"topic": topic, "error": nullable(errorName(err))})
	return nil
}

// saramaListGroups: ListConsumerGroups (every broker's ListGroups): names and protocol types
// only, no state or type.
func saramaListGroups(a saramaAdmin, _ options) error {
	groups, err := a.adm.ListConsumerGroups()
	if err != nil {
		return err
	}
	lines := []any{}
	for _, g := range sortedKeys(groups) {
		lines = append(lines, groupListLine(g, "", "", groups[g]))
	}
	printLine(map[string]any{"error": nil, "groups": lines})
	return nil
}
