package metrics

import (
	"context"
	"fmt"

	"backstop/app"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	jobsDesc = prometheus.NewDesc("backstop_jobs",
		"Jobs waiting (queued) and running now, by queue; read from the catalogue at scrape time.",
		[]string{"queue", "state"}, nil)
	storedBytesDesc = prometheus.NewDesc("backstop_storage_target_stored_bytes",
		"Bytes Backstop keeps on the storage target (pack files of the blob store).",
		[]string{"target", "name", "kind"}, nil)
	freeBytesDesc = prometheus.NewDesc("backstop_storage_target_free_bytes",
		"Bytes free on the storage target at its last check; absent where the target cannot say (S3).",
		[]string{"target", "name", "kind"}, nil)
	capacityBytesDesc = prometheus.NewDesc("backstop_storage_target_capacity_bytes",
		"Size of the storage target at its last check; absent where the target cannot say (S3).",
		[]string{"target", "name", "kind"}, nil)
	targetStateDesc = prometheus.NewDesc("backstop_storage_target_state",
		"State of the storage target at its last check: 1 for the series whose state label is the current state (ok, degraded, full, unreachable), 0 for the others.",
		[]string{"target", "name", "kind", "state"}, nil)
	targetDefaultDesc = prometheus.NewDesc("backstop_storage_target_default",
		"1 for the default storage target, 0 for the others.",
		[]string{"target", "name", "kind"}, nil)
)

var targetStates = []string{app.StorageOK, app.StorageDegraded, app.StorageFull, app.StorageUnreachable}

// stateCollector reads the gauges that describe the appliance now from the
// store, once per scrape: two indexed reads, no network.
type stateCollector struct{ src Sources }

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{jobsDesc, storedBytesDesc, freeBytesDesc, capacityBytesDesc, targetStateDesc, targetDefaultDesc} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.src.ScrapeTimeout)
	defer cancel()
	if c.src.Jobs != nil {
		c.collectJobs(ctx, ch)
	}
	if c.src.Storage != nil {
		c.collectStorage(ctx, ch)
	}
}

// collectJobs reports every known queue in both states, 0 where none is,
// so that a queue draining to empty shows 0 rather than vanishing.
func (c *stateCollector) collectJobs(ctx context.Context, ch chan<- prometheus.Metric) {
	counts, err := c.src.Jobs.CountActiveJobs(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(jobsDesc, fmt.Errorf("counting jobs: %w", err))
		return
	}
	type key struct{ queue, state string }
	n := map[key]int{}
	for _, q := range app.JobQueues {
		n[key{q, app.JobQueued}], n[key{q, app.JobRunning}] = 0, 0
	}
	for _, jc := range counts {
		n[key{jc.Queue, jc.State}] += jc.Count
	}
	for k, v := range n {
		ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(v), k.queue, k.state)
	}
}

func (c *stateCollector) collectStorage(ctx context.Context, ch chan<- prometheus.Metric) {
	ts, err := c.src.Storage.Targets(ctx, app.StorageTargetFilter{})
	if err != nil {
		ch <- prometheus.NewInvalidMetric(storedBytesDesc, fmt.Errorf("listing storage targets: %w", err))
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, t := range ts {
		labels := []string{t.ID, t.Name, t.Kind}
		gauge(storedBytesDesc, float64(t.StoredBytes), labels...)
		if t.FreeBytes != nil {
			gauge(freeBytesDesc, float64(*t.FreeBytes), labels...)
		}
		if t.CapacityBytes != nil {
			gauge(capacityBytesDesc, float64(*t.CapacityBytes), labels...)
		}
		for _, s := range targetStates {
			gauge(targetStateDesc, boolValue(t.State == s), t.ID, t.Name, t.Kind, s)
		}
		gauge(targetDefaultDesc, boolValue(t.Default), labels...)
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
