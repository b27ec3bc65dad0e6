package alerts

import "time"

func notRunning() map[string]string {
	return map[string]string{"alertname": "ClusterAutoscalerNotRunning", "severity": "warning"}
}

func loopsFailing() map[string]string {
	return map[string]string{"alertname": "ClusterAutoscalerLoopsFailing", "severity": "warning"}
}

func dataStale() map[string]string {
	return map[string]string{"alertname": "ClusterAutoscalerDataStale", "severity": "warning"}
}

// healthCases are about the autoscaler's own health. Time starts at 0, so a
// loop that starts every minute sets last_activity to 0+60xN: time() - it is
// 0 at every evaluation.
var healthCases = []alertCase{
	{
		name:   "loops that run and succeed raise nothing",
		health: true,
		load: `
load 1m
  cluster_autoscaler_last_activity{activity="main",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 0+60x20
  cluster_autoscaler_last_activity{activity="mainSuccessful",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 0+60x20
`,
		want: []at{{At: 0}, {At: 20 * time.Minute}},
	},
	{
		// The last loop started at 5m: 5 minutes in the expression, then
		// `for: 5m`.
		name:   "a leader whose loops stop fires 10 minutes after the last loop started",
		health: true,
		load: `
load 1m
  cluster_autoscaler_last_activity{activity="main",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 0+60x5 300x15
  cluster_autoscaler_last_activity{activity="mainSuccessful",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 0+60x5 300x15
`,
		want: []at{
			{At: 10 * time.Minute},
			{At: 11 * time.Minute, Alerts: []alert{{State: pending, Labels: notRunning()}}},
			{At: 16 * time.Minute, Alerts: []alert{{State: firing, Labels: notRunning(), Annotations: map[string]string{
				"summary": "The cluster autoscaler has not run a loop for at least 10 minutes.",
				"description": "No replica of the cluster autoscaler has started a loop for at least 10 minutes, or none has led since it " +
					"started. Pending pods get no nodes and unneeded nodes are not removed until a replica leads and its loop runs again.",
				"runbook_url": wantRunbooks["ClusterAutoscalerNotRunning"],
			}}}},
		},
	},
	{
		// A replica that never led exports no last_activity at all; the
		// old leader's series went with its pod.
		name:   "no replica leading fires after 5 minutes",
		health: true,
		load: `
load 1m
  cluster_autoscaler_nodes_count{state="ready",instance="10.0.0.8:8085",pod="quotascale-autoscaler-1"} 3x10
`,
		want: []at{
			{At: 0, Alerts: []alert{{State: pending, Labels: notRunning()}}},
			{At: 5 * time.Minute, Alerts: []alert{{State: firing, Labels: notRunning()}}},
		},
	},
	{
		// Loops start every minute; the last success was at 3m, so the gap
		// passes 10 minutes at 14m.
		name:   "loops that keep failing fire once the last success is 10 minutes behind",
		health: true,
		load: `
load 1m
  cluster_autoscaler_last_activity{activity="main",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 0+60x20
  cluster_autoscaler_last_activity{activity="mainSuccessful",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 0+60x3 180x17
  cluster_autoscaler_errors_total{type="cloudProviderError",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 0x3 1+1x17
  cluster_autoscaler_errors_total{type="apiCallError",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 0x20
`,
		want: []at{
			{At: 13 * time.Minute},
			{At: 14 * time.Minute, Alerts: []alert{{State: firing, Labels: loopsFailing(), Annotations: map[string]string{
				"summary": "Every cluster autoscaler loop has failed for at least 10 minutes.",
				"description": "The cluster autoscaler keeps starting loops, but none has succeeded for 11m 0s. " +
					"Errors by type in the last 10 minutes: cloudProviderError. Scale-up and scale-down wait until a loop succeeds.",
				"runbook_url": wantRunbooks["ClusterAutoscalerLoopsFailing"],
			}}}},
		},
	},
	{
		name:   "loops skipped on stale data fire at once and resolve once the last leaves the 10m window",
		health: true,
		load: `
load 1m
  cluster_autoscaler_last_activity{activity="main",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 0+60x25
  cluster_autoscaler_last_activity{activity="mainSuccessful",instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 0+60x25
  quotascale_autoscaler_stale_data_skipped_loops_total{instance="10.0.0.7:8085",pod="quotascale-autoscaler-0"} 0x4 1+1x2 3x18
`,
		want: []at{
			{At: 4 * time.Minute},
			{At: 5 * time.Minute, Alerts: []alert{{State: firing, Labels: dataStale(), Annotations: map[string]string{
				"summary": "The cluster autoscaler skips loops on stale data.",
				"description": "In the last 10 minutes the cluster autoscaler skipped 1 loop(s) because its view of the cluster was " +
					"older than --max-stale-data: it could not reach the API server. It scales nothing on a stale view, so no quota " +
					"is overshot, and pending pods wait.",
				"runbook_url": wantRunbooks["ClusterAutoscalerDataStale"],
			}}}},
			// The last skip, between 6m and 7m, leaves the left-open 10m
			// window at 16m.
			{At: 15 * time.Minute, Alerts: []alert{{State: firing, Labels: dataStale()}}},
			{At: 16 * time.Minute},
		},
	},
}
