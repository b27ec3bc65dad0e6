package localcluster

import (
	"fmt"
	"io"
	"regexp"
	"strings"
)

// WriteSummary tells what runs: the Cluster API objects, the in-process
// autoscaler, or the command lines that run the binary against the node
// groups, one line each, for a shell.
func (g *NodeGroups) WriteSummary(w io.Writer, nodeGroups string) {
	if len(g.MachineDeployments) > 0 {
		fmt.Fprintf(w, "Cluster %s/%s with MachineDeployments %s\n", LocalUpClusterAPINamespace, LocalUpClusterAPICluster,
			strings.Join(g.MachineDeployments, ", "))
	}
	for _, warning := range g.Warnings {
		fmt.Fprintf(w, "Warning: %s\n", warning)
	}
	if g.Autoscaler != nil {
		fmt.Fprintf(w, "Cluster autoscaler running (%s provider, node groups %s); metrics at http://%s/metrics, visibility log %s\n",
			g.Provider, nodeGroups, g.MetricsAddress, g.Options.VisibilityLogFile)
		return
	}
	fmt.Fprintf(w, "Node groups %s are up for the %s provider; no autoscaler runs here (--autoscaler=false).\n", nodeGroups, g.Provider)
	fmt.Fprintf(w, "Run Quotascale's (`make build`) against them from the repository's root:\n\n  %s\n", shellQuote(g.Command))
	if len(g.UpstreamCommand) > 0 {
		fmt.Fprintf(w, "\nor upstream's, with the same flags less Quotascale's own (in upstream's image /cluster-autoscaler,\n"+
			"with host networking: the kubeconfig's server is 127.0.0.1):\n\n  %s\n", shellQuote(g.UpstreamCommand))
	}
}

// shellSafe are the arguments a POSIX shell reads as they are.
var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// shellQuote writes args as one POSIX shell command line: an argument with
// any other character is single-quoted.
func shellQuote(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		if shellSafe.MatchString(a) {
			quoted[i] = a
			continue
		}
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(quoted, " ")
}
