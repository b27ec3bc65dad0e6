package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/quotascale/quotascale/localcluster"
)

func usage() {
	out := flag.CommandLine.Output()
	fmt.Fprintf(out, "Usage: %s [flags] [-- cluster-autoscaler flags]\n\n", os.Args[0])
	fmt.Fprintln(out, "Flags after -- go to the cluster autoscaler, in process or on the command line printed with --autoscaler=false,")
	fmt.Fprintln(out, "for example -- --balance-similar-node-groups --expander=priority,least-waste.")
	fmt.Fprintln(out)
	flag.PrintDefaults()
}

// checkLocalFlags refuses combinations that would start the control plane
// only to fail, or to ignore the autoscaler's flags.
func checkLocalFlags(runDemo, autoscaler bool, nodeGroups string, clusterAPI bool, scan time.Duration) error {
	switch {
	case runDemo && !autoscaler:
		return errors.New("--demo plays its scenarios with the in-process autoscaler; leave out --autoscaler=false")
	case flag.NArg() > 0 && nodeGroups == "" && autoscaler && !runDemo:
		return fmt.Errorf("cluster-autoscaler flags %q need node groups: add --node-group-config, or --autoscaler=false for the example ones", flag.Args())
	}
	return localcluster.CheckAutoscalerArgs(localcluster.NodeGroupsOptions{
		Config: nodeGroups, ClusterAPI: clusterAPI, NoAutoscaler: !autoscaler, AutoscalerArgs: flag.Args(), ScanInterval: scan,
	})
}

// startNodeGroups starts the node groups and their infrastructure, and the
// autoscaler in process unless noAutoscaler, with the cluster-autoscaler
// flags after --; it prints what runs, or how to run the binary.
func startNodeGroups(ctx context.Context, cluster *localcluster.Cluster, nodeGroups string, clusterAPI, noAutoscaler bool,
	scan time.Duration, visibilityLog string) (*localcluster.NodeGroups, error) {
	if clusterAPI {
		fmt.Println("Starting Cluster API (MachineDeployment, MachineSet, Machine and MachinePool controllers, kwok infrastructure)...")
	}
	groups, err := cluster.StartNodeGroups(ctx, localcluster.NodeGroupsOptions{
		Config: nodeGroups, ClusterAPI: clusterAPI, NoAutoscaler: noAutoscaler,
		AutoscalerArgs: flag.Args(), ScanInterval: scan, VisibilityLog: visibilityLog,
	})
	if err != nil {
		return nil, err
	}
	groups.WriteSummary(os.Stdout, nodeGroups)
	return groups, nil
}
