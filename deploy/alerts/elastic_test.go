package alerts

import "time"

// elasticQuotaCases test the scheduler's ElasticQuotaTree alerts. The series
// carry the labels a scrape of kube-scheduler's /metrics adds.
var elasticQuotaCases = []alertCase{
	{
		name: "an invalid tree for 5 minutes fires, and resolves once valid",
		load: `
load 1m
  quotascale_elastic_quota_tree_valid{tree="kube-system/elasticquotatree",instance="10.0.0.9:10259",pod="quotascale-scheduler-0"} 0x9 1x10
  quotascale_elastic_quota_tree_valid{tree="team/draft",instance="10.0.0.9:10259",pod="quotascale-scheduler-0"} 1x19
`,
		want: []at{
			{At: 0, Alerts: []alert{{State: pending, Labels: treeInvalid("kube-system/elasticquotatree")}}},
			{At: 4 * time.Minute, Alerts: []alert{{State: pending, Labels: treeInvalid("kube-system/elasticquotatree")}}},
			{At: 5 * time.Minute, Alerts: []alert{{
				State:  firing,
				Labels: treeInvalid("kube-system/elasticquotatree"),
				Annotations: map[string]string{
					"summary": "ElasticQuotaTree kube-system/elasticquotatree is invalid; its last valid generation stays in force.",
					"description": "The current generation of ElasticQuotaTree kube-system/elasticquotatree has broken at least one rule for 5 minutes. " +
						"The scheduler and the autoscaler keep enforcing its last valid generation (status.lastValid), " +
						"or no quota at all if it never had one; the edit that made it invalid is not in force. " +
						"The tree's Valid condition and its InvalidElasticQuotaTree event list every broken rule.",
					"runbook_url": wantRunbooks["ElasticQuotaTreeInvalid"],
				},
			}}},
			{At: 10 * time.Minute},
		},
	},
	{
		// Every replica judges the trees; one that has caught up says valid.
		name: "a tree valid on one scheduler replica is not invalid",
		load: `
load 1m
  quotascale_elastic_quota_tree_valid{tree="kube-system/elasticquotatree",instance="10.0.0.9:10259",pod="quotascale-scheduler-0"} 1x10
  quotascale_elastic_quota_tree_valid{tree="kube-system/elasticquotatree",instance="10.0.0.10:10259",pod="quotascale-scheduler-1"} 0x10
`,
		want: []at{{At: 0}, {At: 10 * time.Minute}},
	},
	{
		name: "pods pending on a leaf at its max for 10 minutes fire, and resolve once admitted",
		load: `
load 1m
  quotascale_elastic_quota_pending_pods{quota_node="root.a.1",resource="cpu",instance="10.0.0.9:10259",pod="quotascale-scheduler-0"} 0x1 1x14 0x5
  quotascale_elastic_quota_used{quota_node="root.a.1",resource="cpu",instance="10.0.0.9:10259",pod="quotascale-scheduler-0"} 20x20
  quotascale_elastic_quota_max{quota_node="root.a.1",resource="cpu",instance="10.0.0.9:10259",pod="quotascale-scheduler-0"} 20x20
`,
		want: []at{
			{At: 1 * time.Minute},
			{At: 2 * time.Minute, Alerts: []alert{{State: pending, Labels: atMax("root.a.1", "cpu")}}},
			{At: 11 * time.Minute, Alerts: []alert{{State: pending, Labels: atMax("root.a.1", "cpu")}}},
			{At: 12 * time.Minute, Alerts: []alert{{
				State:  firing,
				Labels: atMax("root.a.1", "cpu"),
				Annotations: map[string]string{
					"summary": "1 pod(s) pending for 10 minutes: quota node root.a.1 is at its cpu max.",
					"description": "For at least 10 minutes the scheduler has refused pods because they would take quota node " +
						"root.a.1 past its cpu max (20 used of 20). " +
						"They stay Pending until pods of the quota node finish or its max is raised; running pods are not affected.",
					"runbook_url": wantRunbooks["ElasticQuotaAtMaxPodsPending"],
				},
			}}},
			{At: 16 * time.Minute, Alerts: []alert{{State: firing, Labels: atMax("root.a.1", "cpu")}}},
			{At: 17 * time.Minute},
		},
	},
	{
		// A pod that waits a few minutes for a finishing pod is quota at work.
		name: "pods pending for 5 minutes only go pending",
		load: `
load 1m
  quotascale_elastic_quota_pending_pods{quota_node="root.a.1",resource="cpu",instance="10.0.0.9:10259",pod="quotascale-scheduler-0"} 2x4 0x15
`,
		want: []at{
			{At: 4 * time.Minute, Alerts: []alert{{State: pending, Labels: atMax("root.a.1", "cpu")}}},
			{At: 5 * time.Minute},
			{At: 15 * time.Minute},
		},
	},
	{
		// After a leader change the old leader's gauge drops to 0 and the new
		// one's rises: max merges them without a gap, and memory reads in
		// bytes as people read memory.
		name: "an inner node at its memory max, across a leader change",
		load: `
load 1m
  quotascale_elastic_quota_pending_pods{quota_node="root.a",resource="memory",instance="10.0.0.9:10259",pod="quotascale-scheduler-0"} 3x5 0x10
  quotascale_elastic_quota_pending_pods{quota_node="root.a",resource="memory",instance="10.0.0.10:10259",pod="quotascale-scheduler-1"} 0x5 3x10
  quotascale_elastic_quota_used{quota_node="root.a",resource="memory",instance="10.0.0.10:10259",pod="quotascale-scheduler-1"} 42949672960x15
  quotascale_elastic_quota_max{quota_node="root.a",resource="memory",instance="10.0.0.10:10259",pod="quotascale-scheduler-1"} 42949672960x15
`,
		want: []at{{At: 10 * time.Minute, Alerts: []alert{{
			State:  firing,
			Labels: atMax("root.a", "memory"),
			Annotations: map[string]string{
				"summary": "3 pod(s) pending for 10 minutes: quota node root.a is at its memory max.",
				"description": "For at least 10 minutes the scheduler has refused pods because they would take quota node " +
					"root.a past its memory max (40GiB used of 40GiB). " +
					"They stay Pending until pods of the quota node finish or its max is raised; running pods are not affected.",
				"runbook_url": wantRunbooks["ElasticQuotaAtMaxPodsPending"],
			},
		}}}},
	},
	{
		name: "reclaims that keep failing fire, and resolve 15 minutes after the last failure",
		load: `
load 1m
  quotascale_elastic_quota_reclaims_total{quota_node="root.b.1",result="failed",instance="10.0.0.9:10259",pod="quotascale-scheduler-0"} 0 1 2 3 3x20
  quotascale_elastic_quota_reclaims_total{quota_node="root.b.1",result="started",instance="10.0.0.9:10259",pod="quotascale-scheduler-0"} 0x23
`,
		want: []at{
			{At: 0},
			{At: 1 * time.Minute, Alerts: []alert{{State: pending, Labels: reclaimFailing("root.b.1")}}},
			{At: 6 * time.Minute, Alerts: []alert{{
				State:  firing,
				Labels: reclaimFailing("root.b.1"),
				Annotations: map[string]string{
					"summary": "Reclaims for quota node root.b.1 are failing.",
					"description": "In the last 15 minutes reclaims for quota node root.b.1 failed or expired, and none " +
						"completed: its pods are owed their guaranteed min, but the scheduler could not evict the pods " +
						"that borrow it, or could not place the pod it evicted them for.",
					"runbook_url": wantRunbooks["ElasticQuotaReclaimFailing"],
				},
			}}},
			// The last failure happened between 2m and 3m; range selectors are
			// left-open, so the 2m sample leaves the window at 17m.
			{At: 16 * time.Minute, Alerts: []alert{{State: firing, Labels: reclaimFailing("root.b.1")}}},
			{At: 17 * time.Minute},
		},
	},
	{
		// A failure, then a retry that got the preemptor placed.
		name: "a failed reclaim followed by one that completes does not fire",
		load: `
load 1m
  quotascale_elastic_quota_reclaims_total{quota_node="root.b.1",result="failed",instance="10.0.0.9:10259",pod="quotascale-scheduler-0"} 0 1 1x20
  quotascale_elastic_quota_reclaims_total{quota_node="root.b.1",result="placed",instance="10.0.0.9:10259",pod="quotascale-scheduler-0"} 0 0 0 1 1x20
`,
		want: []at{
			{At: 1 * time.Minute, Alerts: []alert{{State: pending, Labels: reclaimFailing("root.b.1")}}},
			{At: 3 * time.Minute},
			{At: 10 * time.Minute},
		},
	},
	{
		// The preemptor never got placed while its room was held.
		name: "expired holds count as failures",
		load: `
load 1m
  quotascale_elastic_quota_reclaims_total{quota_node="root.a.2",result="expired",instance="10.0.0.9:10259",pod="quotascale-scheduler-0"} 0 0 1 1x20
`,
		want: []at{
			{At: 6 * time.Minute, Alerts: []alert{{State: pending, Labels: reclaimFailing("root.a.2")}}},
			{At: 7 * time.Minute, Alerts: []alert{{State: firing, Labels: reclaimFailing("root.a.2")}}},
		},
	},
}
