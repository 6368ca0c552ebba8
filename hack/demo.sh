#!/usr/bin/env bash
# make demo: start the sandbox with the sample AKS-shaped cluster, then show
# sluice's main job on it. Every command is printed before it runs.
set -euo pipefail
cd "$(dirname "$0")/.."

tools="$(hack/tools/build.sh)"
export SLUICE_TOOLS_BIN="$tools"
sluice=bin/sluice
kubectl="$tools/kubectl"

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
run() { step "$*"; "$@" || true; }

bin/sluice sandbox down >/dev/null
run $sluice sandbox up
export KUBECONFIG="$($sluice sandbox status -o json | sed -n 's/.*"kubeconfig": "\(.*\)".*/\1/p')"
kubectl() { "$kubectl" "$@"; }

run kubectl get nodes -L kubernetes.azure.com/agentpool,kubernetes.azure.com/scalesetpriority,topology.kubernetes.io/zone
run kubectl get pods,pdb -n shop -o wide

echo
echo "# Before draining: what will make it hang, lose data or run out of time?"
run $sluice doctor -l kubernetes.azure.com/agentpool=user

echo
echo "# What would draining the user pool do? A dry run spends each budget as the real drain would."
run $sluice drain -l kubernetes.azure.com/agentpool=user --ignore-daemonsets --dry-run

echo
echo "# Drain it, three nodes at once. Nodes that can never empty are refused up front, untouched."
run $sluice drain -l kubernetes.azure.com/agentpool=user --ignore-daemonsets --parallel 3

run kubectl get events -A --field-selector involvedObject.kind=Node --sort-by=.lastTimestamp

echo
echo "# A spot preemption: both spot nodes go away in 30 seconds. Replacements have nowhere to run,"
echo "# so budgets cannot recover; sluice deletes held pods while they can still shut down gracefully."
run $sluice drain -l kubernetes.azure.com/agentpool=spot --ignore-daemonsets --deadline 30s --parallel 2

run kubectl get pods -n shop -l app=worker -o wide

echo
echo "The sandbox keeps running (KUBECONFIG=$KUBECONFIG); 'make demo-down' removes it."
