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
echo "# The node is gone, its drain is not: the controller keeps each node's last drain for a day."
run $sluice explain node "$spot" --timeline "${TMPDIR:-/tmp}/sluice-preempted.html"

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
echo "# sluice makes and deletes its machines. Consolidation: its 8 batch pods, two on each of its 4 nodes,"
echo "# fit on 2. With consolidateAfter set, sluice proves with its placement simulation where every pod"
echo "# would go, waits 15 s and checks again, then takes the spare nodes away within the budget (50%),"
echo "# drained under the workload's PDB."
run kubectl get nodepool batch
run kubectl get nodes -l kubernetes.azure.com/agentpool=batch -L node.kubernetes.io/instance-type
step "kubectl patch nodepool batch --type merge -p '{\"spec\":{\"disruption\":{\"consolidateAfter\":\"10s\"}}}'"
kubectl patch nodepool batch --type merge -p '{"spec":{"disruption":{"consolidateAfter":"10s"}}}' || true
sleep 12
run $sluice plan consolidation batch
step "# watching the pool shrink (every 3 s, until two nodes are left)"
for _ in $(seq 60); do
  n="$(kubectl get nodes -l kubernetes.azure.com/agentpool=batch --no-headers 2>/dev/null | wc -l)"
  printf '%s  %s node(s)\n' "$(date +%T)" "$n"
  [ "$n" -le 2 ] && break
  sleep 3
done
run kubectl get pods -n shop -l app=batch -o wide

echo
echo "# The controller's Prometheus metrics."
metrics="$($sluice sandbox status -o json | sed -n 's/.*"metricsAddress": "\(.*\)".*/\1/p')"
step "curl -s http://$metrics/metrics | grep -E '^sluice_(maintenance|disruption|budget|nodes_drifted|consolidation|upgrade)'"
curl -s "http://$metrics/metrics" | grep -E '^sluice_(maintenance|disruption|budget|nodes_drifted|consolidation|upgrade)' | grep -v '_bucket' || true

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
echo "# Last, an upgrade of the batch pool to a new node image, the way AKS rolls a node pool: a surge node"
echo "# first, then the old node drained (within drainTimeout), soaked, and deleted. Before anything changes,"
echo "# sluice prints its forecast: the batches, how long each takes (boot, the PDB's waves, grace periods,"
echo "# soak) and which nodes would block (sluice plan upgrade prints the same without starting)."
new_image=AKSUbuntu-2204gen2containerd-202612.01.0
run $sluice upgrade pool batch --image "$new_image" --max-surge 1 --node-soak-duration 5s
run timeout 300 $sluice upgrade status batch -w --interval 1s
run $sluice upgrade status batch
run kubectl get nodes -l kubernetes.azure.com/agentpool=batch -L sluice.dev/upgrade-status
run kubectl get pods -n shop -l app=batch -o wide

echo
echo "# Node health. The batch pool opts in to repair (a node NotReady for 20 s is broken; the breaker"
echo "# allows one broken node at a time) and to reboots its OS asks for. sluice repairs a broken node"
echo "# first by rebooting it in place through the provider (drained first while its kubelet answers),"
echo "# and replaces it only if the reboot does not mend it."
step "kubectl patch nodepool batch --type merge -p '{\"spec\":{\"repair\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\",\"toleration\":\"20s\"}],\"maxUnhealthy\":\"1\",\"maxUnhealthyPerZone\":\"100%\"},\"reboot\":{}}}'"
kubectl patch nodepool batch --type merge -p '{"spec":{"repair":{"conditions":[{"type":"Ready","status":"False","toleration":"20s"}],"maxUnhealthy":"1","maxUnhealthyPerZone":"100%"},"reboot":{}}}' || true
broken="$(kubectl get nodes -l kubernetes.azure.com/agentpool=batch -o jsonpath='{.items[0].metadata.name}')"
patched="$(kubectl get nodes -l kubernetes.azure.com/agentpool=batch -o jsonpath='{.items[1].metadata.name}')"
run $sluice sandbox fault --node "$broken" --not-ready 5m
sleep 8
run $sluice explain node "$broken"
step "# waiting for the Repaired event on $broken"
wait_for_event "$broken" Repaired 120
run $sluice explain node "$broken"

echo
echo "# Unattended upgrades left /var/run/reboot-required on both batch nodes; their agents report it on"
echo "# the Nodes (here written by hand: the sandbox's nodes have no OS). The budget (50% of 2) lets one"
echo "# go at a time: sluice drains it, reboots it through the provider, waits for it on a new boot,"
echo "# uncordons it, then takes the next. sluice plan reboots forecasts what is left."
asked="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
step "kubectl annotate node $patched $broken maintenance.sluice.dev/reboot-required=$asked"
kubectl annotate node "$patched" "$broken" "maintenance.sluice.dev/reboot-required=$asked" --overwrite >/dev/null || true
run $sluice plan reboots batch
step "# waiting for the Rebooted events on $patched and $broken"
wait_for_event "$patched" Rebooted 120
wait_for_event "$broken" Rebooted 120
step "# $patched's Events"; events "$patched" || true

echo
echo "# The status as a line per change (here for 5 s; it runs until interrupted)."
step "timeout 5 $sluice status -w"
timeout 5 $sluice status -w || true

echo
echo "The sandbox keeps running (KUBECONFIG=$KUBECONFIG); 'make demo-down' removes it."
echo
echo "Watch it live, in a terminal (q quits; docs/top.md):"
echo "  KUBECONFIG=$KUBECONFIG $sluice top"
echo "then, from another terminal, preempt a spot node and watch it drain:"
echo "  $sluice sandbox event --node \"\$(KUBECONFIG=$KUBECONFIG $kubectl get nodes -l kubernetes.azure.com/agentpool=spot -o jsonpath='{.items[0].metadata.name}')\" --type Preempt --in 60s"
