// Command kubecluster is etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok in one
// multi-call binary (like busybox, or Kubernetes' former hyperkube): the program it runs is the name it was
// called by, so mk/kube.mk links var/kube/bin/<program> to it. One binary instead of five links the shared
// Kubernetes libraries once, which is most of the build's time and disk on a small machine.
//
// Each case is the upstream program's own main, unchanged: k8s.io/kubernetes cmd/<program>/<program>.go,
// go.etcd.io/etcd/server/v3 etcdmain (what etcd's own main.go calls) and sigs.k8s.io/kwok cmd/kwok/main.go.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	_ "time/tzdata" // kube-apiserver's main imports it: CronJob timeZone validation needs the zone database.

	"github.com/spf13/pflag"
	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format, as every Kubernetes main registers it.
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics, as every Kubernetes main.
	_ "k8s.io/component-base/metrics/prometheus/version"  // build-version metric, as every Kubernetes main.
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	"sigs.k8s.io/kwok/pkg/config"
	kwokcmd "sigs.k8s.io/kwok/pkg/kwok/cmd"
	"sigs.k8s.io/kwok/pkg/log"
	"sigs.k8s.io/kwok/pkg/utils/signals"
)

func main() {
	program := filepath.Base(os.Args[0])
	switch program {
	case "etcd":
		etcdmain.Main(os.Args)
	case "kube-apiserver":
		os.Exit(cli.Run(apiserver.NewAPIServerCommand()))
	case "kube-controller-manager":
		os.Exit(cli.Run(controllermanager.NewControllerManagerCommand()))
	case "kube-scheduler":
		os.Exit(cli.Run(scheduler.NewSchedulerCommand()))
	case "kwok":
		os.Exit(kwok())
	default:
		fmt.Fprintf(os.Stderr, "%s: call me as etcd, kube-apiserver, kube-controller-manager, kube-scheduler or kwok\n", program)
		os.Exit(2)
	}
}

// kwok is sigs.k8s.io/kwok cmd/kwok/main.go's main, returning its exit code.
func kwok() int {
	// cobra adds pflag.CommandLine to every root command. In this binary it holds Kubernetes' --version
	// (k8s.io/component-base/version/verflag registers it at init), which is not the bool cobra expects for
	// kwok's own --version, so every kwok run would fail; the kwok binary upstream has an empty one.
	pflag.CommandLine = pflag.NewFlagSet(os.Args[0], pflag.ExitOnError)

	flagset := pflag.NewFlagSet("global", pflag.ContinueOnError)
	flagset.ParseErrorsAllowlist.UnknownFlags = true
	flagset.Usage = func() {}

	ctx := signals.SetupSignalContext()
	ctx, logger := log.InitFlags(ctx, flagset)

	ctx, err := config.InitFlags(ctx, flagset)
	if err != nil {
		_, _ = os.Stderr.Write([]byte(flagset.FlagUsages()))
		logger.Error("Init config flags", "err", err)
		return 1
	}

	command := kwokcmd.NewCommand(ctx)
	command.PersistentFlags().AddFlagSet(flagset)
	if err := command.ExecuteContext(ctx); err != nil {
		logger.Error("Execute exit", "err", err)
		return 1
	}
	return 0
}
