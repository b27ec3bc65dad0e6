package config

// klogIgnored is why klog's output flags do nothing, here as in upstream's
// binary: component-base's logger writes every line, so klog's own file and
// threshold handling is never reached.
const klogIgnored = "every line goes through component-base's logger to stderr or --log-file, so klog's own output handling is never used; upstream's binary ignores it too"

// klogLegacyLines is how klog's formatting flags act, here as in upstream's
// binary.
const klogLegacyLines = "klog applies it to lines logged through klog's global functions (Kubernetes libraries); lines of the contextual logger are formatted by component-base's text logger, as upstream"

// loggingFlags: klog's flags, which upstream's main registers with
// klog.InitFlags, component-base's logging configuration and the feature gate.
var loggingFlags = []Flag{
	{Name: "v", Type: "Level", Upstream: "0", Treatment: Implemented, By: ByLogsAPI,
		Usage: "Log verbosity; -v=4 and --v=4 both work."},
	{Name: "vmodule", Type: "pattern=N,...", Upstream: "", Treatment: Implemented, By: ByLogsAPI,
		Usage: "Comma-separated pattern=N settings for per-file verbosity (text format only)."},
	{Name: "logging-format", Type: "string", Upstream: "text", Treatment: Implemented, By: ByLogsAPI,
		Usage: "Log format: text or json."},
	{Name: "log-flush-frequency", Type: "duration", Upstream: "5s", Treatment: Implemented, By: ByLogsAPI,
		Usage: "Longest time between log flushes."},
	{Name: "log-text-split-stream", Type: "bool", Upstream: "false", Treatment: Implemented, By: ByLogsAPI,
		Usage: "[Alpha, LoggingAlphaOptions] In text format, write info lines to the info stream and errors to the error stream."},
	{Name: "log-text-info-buffer-size", Type: "quantity", Upstream: "0", Treatment: Implemented, By: ByLogsAPI,
		Usage: "[Alpha, LoggingAlphaOptions] In text format with split streams, buffer this many bytes of info lines; 0 means no buffer."},
	{Name: "log-json-split-stream", Type: "bool", Upstream: "false", Treatment: Implemented, By: ByLogsAPI,
		Usage: "[Alpha, LoggingAlphaOptions] In JSON format, write info lines to the info stream and errors to the error stream."},
	{Name: "log-json-info-buffer-size", Type: "quantity", Upstream: "0", Treatment: Implemented, By: ByLogsAPI,
		Usage: "[Alpha, LoggingAlphaOptions] In JSON format with split streams, buffer this many bytes of info lines; 0 means no buffer."},
	{Name: "feature-gates", Type: "mapStringBool", Upstream: "", Treatment: Implemented, By: ByFeatureGate,
		Usage: "Comma-separated Name=true|false pairs of Kubernetes feature gates, for the in-process scheduler plugins and for logging."},

	{Name: "logtostderr", Type: "bool", Upstream: "true", Treatment: Implemented, By: ByKlog,
		Usage: "Log to stderr; with false and --log-file, log to that file instead."},
	{Name: "alsologtostderr", Type: "bool", Upstream: "false", Treatment: Implemented, By: ByKlog,
		Usage: "With --logtostderr=false and --log-file, log to stderr as well."},
	{Name: "log-file", Type: "string", Upstream: "", Treatment: Implemented, By: ByKlog,
		Usage: "With --logtostderr=false, append the log to this file; its directory is created."},
	{Name: "skip-headers", Type: "bool", Upstream: "false", Treatment: Implemented, By: ByKlog,
		Usage: "Leave the header (severity, time, source) out of log lines.",
		Why:   klogLegacyLines},
	{Name: "add-dir-header", Type: "bool", Upstream: "false", Treatment: Implemented, By: ByKlog,
		Usage: "Include the source file's directory in log line headers.",
		Why:   klogLegacyLines},
	{Name: "log-backtrace-at", Type: "traceLocation", Upstream: ":0", Treatment: Implemented, By: ByKlog,
		Usage: "Add a stack trace to the line logged at file:N.",
		Why:   klogLegacyLines},
	{Name: "log-dir", Type: "string", Upstream: "", Treatment: NoEffect, By: ByKlog,
		Usage: "Directory of klog's own log files.",
		Why:   klogIgnored},
	{Name: "log-file-max-size", Type: "uint64", Upstream: "1800", Treatment: NoEffect, By: ByKlog,
		Usage: "Size in MB at which klog's own log files are rotated.",
		Why:   klogIgnored},
	{Name: "one-output", Type: "bool", Upstream: "false", Treatment: NoEffect, By: ByKlog,
		Usage: "Write klog's own log files for their severity only.",
		Why:   klogIgnored},
	{Name: "skip-log-headers", Type: "bool", Upstream: "false", Treatment: NoEffect, By: ByKlog,
		Usage: "Leave the header out of klog's own log files.",
		Why:   klogIgnored},
	{Name: "stderrthreshold", Type: "severity", Upstream: "0", Treatment: NoEffect, By: ByKlog,
		Usage: "Lowest severity klog writes to stderr besides its own files (INFO, WARNING, ERROR, FATAL or 0-3).",
		Why:   klogIgnored},
	{Name: "alsologtostderrthreshold", Type: "severity", Upstream: "0", Treatment: NoEffect, By: ByKlog,
		Usage: "With --alsologtostderr, lowest severity klog writes to stderr.",
		Why:   klogIgnored},
	{Name: "legacy-stderr-threshold-behavior", Type: "bool", Upstream: "false", Treatment: NoEffect, By: ByKlog,
		Usage: "Let klog ignore --stderrthreshold while --logtostderr is true.",
		Why:   klogIgnored},
}
