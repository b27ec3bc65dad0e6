package config

// quotascaleFlags: Quotascale's own flags, which upstream's binary does not
// have.
var quotascaleFlags = []Flag{
	{Name: "elastic-quota-enabled", Type: "bool", Own: true, Treatment: Implemented,
		Usage: "Trigger no scale-up for pods their ElasticQuotaTree (scheduling.sigs.k8s.io/v1beta1) will not admit, honour its ResourceFlavors in the simulation, and keep the tree root's min allocatable on scale-down.",
		Field: func(o *Options) any { return &o.ElasticQuotaEnabled }},
	{Name: "elastic-quota-scheduler-names", Type: "stringSlice", Own: true, Treatment: Implemented,
		Usage: "Schedulers that enforce the ElasticQuotaTree (run the CapacityScheduling plugin): only their pods are judged against the tree, and only their profiles simulate it. The Helm chart sets its scheduler's name.",
		Field: func(o *Options) any { return &o.ElasticQuotaSchedulerNames }},
	{Name: "visibility-log-file", Type: "string", Own: true, Treatment: Implemented,
		Usage: "File the visibility log (one JSON decision per line) is appended to; empty means stdout.",
		Field: func(o *Options) any { return &o.VisibilityLogFile }},
	{Name: "visibility-log-max-size-mb", Type: "int", Own: true, Treatment: Implemented,
		Usage: "With --visibility-log-file, size in MiB the file grows to before it is rotated (renamed with its rotation time and a new file started). " +
			"100 keeps each file small enough for jq to read whole while rotating seldom.",
		Field: func(o *Options) any { return &o.VisibilityLogMaxSizeMB }},
	{Name: "visibility-log-max-backups", Type: "int", Own: true, Treatment: Implemented,
		Usage: "With --visibility-log-file, rotated files kept; older ones are deleted. 0 keeps all (then only --visibility-log-max-age-days bounds them). " +
			"5 bounds the disk the log takes to about six times --visibility-log-max-size-mb, less when compressed.",
		Field: func(o *Options) any { return &o.VisibilityLogMaxBackups }},
	{Name: "visibility-log-max-age-days", Type: "int", Own: true, Treatment: Implemented,
		Usage: "With --visibility-log-file, days a rotated file is kept, counted from its rotation; 0 keeps them regardless of age. " +
			"7 covers a week of incidents looked at after the fact.",
		Field: func(o *Options) any { return &o.VisibilityLogMaxAgeDays }},
	{Name: "visibility-log-compress", Type: "bool", Own: true, Treatment: Implemented,
		Usage: "With --visibility-log-file, gzip rotated files. On by default: every line repeats the same keys, so the files compress well, " +
			"and zcat still reads them.",
		Field: func(o *Options) any { return &o.VisibilityLogCompress }},
	{Name: "visibility-log-format", Type: "string", Own: true, Treatment: Implemented,
		Usage: "Schema of the visibility log: quotascale (node groups, docs/visibility-log.md) or gke (GKE's visibility events: MIGs and GKE's message ids, for queries written for GKE).",
		Field: func(o *Options) any { return &o.VisibilityLogFormat }},
	{Name: "max-stale-data", Type: "duration", Own: true, Treatment: Implemented,
		Usage: "Scale nothing while the API server has been unreachable for longer than this.",
		Field: func(o *Options) any { return &o.StaleDataBound }},
	{Name: "kwok-state-configmap", Type: "string", Own: true, Treatment: Implemented,
		Usage: "With --cloud-provider=kwok, the ConfigMap (NAMESPACE/NAME) where the kwok cloud keeps its instances.",
		Field: func(o *Options) any { return &o.KwokState }},
	{Name: "max-empty-bulk-delete", Type: "int", Own: true, Treatment: Implemented,
		Usage: "Most empty nodes removed at once.",
		Why:   "upstream removed this flag in favour of --max-scale-down-parallelism",
		Field: func(o *Options) any { return &o.MaxEmptyBulkDelete }},
	{Name: "version", Type: "bool", Own: true, Treatment: Implemented, By: ByCommandLine,
		Usage: "Print the version and exit."},
}
