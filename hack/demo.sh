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

# The main job: the cloud announces maintenance through each node's metadata service; the node's
# sluice agent reports it on the Node, and the controller acts before the deadline.
spot="$(kubectl get nodes -l kubernetes.azure.com/agentpool=spot -o jsonpath='{.items[0].metadata.name}')"
user="$(kubectl get nodes -l kubernetes.azure.com/agentpool=user -o jsonpath='{.items[2].metadata.name}')"

events() { kubectl get events -A --field-selector "involvedObject.name=$1" --sort-by=.lastTimestamp \
  -o custom-columns=TIME:.lastTimestamp,REASON:.reason,MESSAGE:.message | grep -v RegisteredNode; }
# wait_for_event NODE REASON SECONDS: until the node has an Event with the reason.
wait_for_event() {
  for _ in $(seq "$3"); do events "$1" 2>/dev/null | grep -q " $2 " && return 0; sleep 1; done
  echo "(no $2 event on $1 after $3 s)"
}

echo
echo "# Azure preempts a loaded spot node with 30 seconds' notice. sluice cordons it at once and drains"
echo "# it against the deadline (NotBefore minus 5 s). The workers ask for 25 s to shut down and their"
echo "# budget lets only two go at a time, so sluice gives each the grace that still fits. Once the"
echo "# node is empty it approves the event, the platform need not wait, and the node is deleted."
run kubectl get pods -n shop -o wide --field-selector "spec.nodeName=$spot"
run $sluice sandbox event --node "$spot" --type Preempt --in 30s
step "kubectl wait --for=delete node/$spot --timeout=60s"
kubectl wait --for=delete "node/$spot" --timeout=60s || true
run events "$spot"
run kubectl get pods -n shop -l app=worker -o wide

echo
echo "# A Redeploy of a user node, announced 2 minutes ahead. The VM keeps its disk, so by default"
echo "# sluice leaves pods without a controller or with emptyDir data in place and names them"
echo "# (DrainBlocked); it approves the event only once the node is empty. The VM moves (the node is"
echo "# NotReady for 10 s), and when the event is over sluice uncordons the node it cordoned."
run $sluice sandbox event --node "$user" --type Redeploy --in 2m --duration 10s
step "# waiting for the Uncordoned event on $user"
wait_for_event "$user" Uncordoned 180
run events "$user"
run kubectl get node "$user"

echo
echo "# Node pools own their machines. The sample's NodePool 'batch' runs on the sandbox's kwok provider:"
echo "# sluice makes and deletes its machines. A new node image in its template drifts all 4 nodes; sluice"
echo "# replaces them replacement first (the new node is Ready before the old one is drained), at most"
echo "# half of the pool at once (budget 50%), and the batch workload's PDB holds throughout."
run kubectl get nodepool batch
run kubectl get nodes -l kubernetes.azure.com/agentpool=batch -L node.kubernetes.io/instance-type
step "kubectl patch nodepool batch --type merge -p '{\"spec\":{\"template\":{\"image\":\"AKSUbuntu-2204gen2containerd-202612.01.0\"}}}'"
kubectl patch nodepool batch --type merge -p '{"spec":{"template":{"image":"AKSUbuntu-2204gen2containerd-202612.01.0"}}}' || true
run $sluice status batch
step "# watching the pool roll (every 3 s, until no node is on the old image)"
for _ in $(seq 60); do
  old="$(kubectl get nodes -l kubernetes.azure.com/agentpool=batch -o jsonpath='{range .items[*]}{.metadata.annotations.sluice\.dev/image}{"\n"}{end}' | grep -c 202611 || true)"
  printf '%s  %s\n' "$(date +%T)" "$(kubectl get nodepool batch --no-headers -o custom-columns=NODES:.status.nodes,DISRUPTING:.status.disrupting,DRIFTED:.status.drifted | tr -s ' ')  (nodes, disrupting, drifted)"
  [ "$old" = 0 ] && break
  sleep 3
done
run kubectl get nodes -l kubernetes.azure.com/agentpool=batch
run kubectl get pods -n shop -l app=batch -o wide

echo
echo "# Consolidation. The batch workload shrinks from 8 replicas to 3: they fit on one node. With"
echo "# consolidateAfter set, sluice proves with its placement simulation where every pod would go, waits"
echo "# 15 s and checks again, then takes the spare nodes away within the budget (drained under the PDB)."
run kubectl scale deployment batch -n shop --replicas 3
step "kubectl patch nodepool batch --type merge -p '{\"spec\":{\"disruption\":{\"consolidateAfter\":\"10s\"}}}'"
kubectl patch nodepool batch --type merge -p '{"spec":{"disruption":{"consolidateAfter":"10s"}}}' || true
sleep 12
run $sluice plan consolidation batch
step "# watching the pool shrink (every 3 s, until one node is left)"
for _ in $(seq 60); do
  n="$(kubectl get nodes -l kubernetes.azure.com/agentpool=batch --no-headers 2>/dev/null | wc -l)"
  printf '%s  %s node(s)\n' "$(date +%T)" "$n"
  [ "$n" -le 1 ] && break
  sleep 3
done
run $sluice plan consolidation batch
run kubectl get pods -n shop -l app=batch -o wide

echo
echo "# The controller's Prometheus metrics."
metrics="$($sluice sandbox status -o json | sed -n 's/.*"metricsAddress": "\(.*\)".*/\1/p')"
step "curl -s http://$metrics/metrics | grep -E '^sluice_(maintenance|disruption|budget|nodes_drifted|consolidation)'"
curl -s "http://$metrics/metrics" | grep -E '^sluice_(maintenance|disruption|budget|nodes_drifted|consolidation)' | grep -v '_bucket' || true

echo
echo "# sluice drain is the same engine, run by a person. Before draining: what will make it hang, lose data or run out of time?"
run $sluice doctor -l kubernetes.azure.com/agentpool=user

echo
echo "# What would draining the user pool do? A dry run spends each budget as the real drain would."
run $sluice drain -l kubernetes.azure.com/agentpool=user --ignore-daemonsets --dry-run

echo
echo "# Drain it, three nodes at once. Nodes that can never empty are refused up front, untouched."
run $sluice drain -l kubernetes.azure.com/agentpool=user --ignore-daemonsets --parallel 3

echo
echo "The sandbox keeps running (KUBECONFIG=$KUBECONFIG); 'make demo-down' removes it."
