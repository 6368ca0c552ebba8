package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/pmezard/go-difflib/difflib"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	chart "github.com/sluice-dev/sluice/charts/sluice"
	"github.com/sluice-dev/sluice/internal/crdschema"
	"github.com/sluice-dev/sluice/internal/importer"
	"github.com/sluice-dev/sluice/internal/kube"
	"github.com/sluice-dev/sluice/internal/nodepool"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// karpenterNodePools names Karpenter's v1 NodePools, for a dynamic client.
var karpenterNodePools = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"}

// importCluster is the cluster an import reads, or why it reads none.
type importCluster struct {
	dyn     dynamic.Interface
	offline string
}

// clusterOrOffline connects when a cluster is configured; with none (no
// kubeconfig, no --server, not in a cluster) the import works from its
// input alone. A cluster configured but unusable is an error.
func clusterOrOffline(ctx context.Context, flags kube.ClientFlags) (importCluster, error) {
	dyn, err := importClient(ctx, flags)
	if errors.Is(err, kube.ErrNoCluster) {
		return importCluster{offline: "no cluster configured: no --kubeconfig, KUBECONFIG, ~/.kube/config or --server"}, nil
	}
	if err != nil {
		return importCluster{}, err
	}
	return importCluster{dyn: dyn}, nil
}

// importFlags are the flags every import takes.
type importFlags struct {
	client           kube.ClientFlags
	file, output     string
	dryRun           bool
	provider         string
	providerSettings string
	selector         string
	name             string
}

func (f *importFlags) add(cmd *cobra.Command, what string, cluster bool) {
	if cluster {
		f.client.AddFlags(cmd.Flags())
	}
	cmd.Flags().StringVarP(&f.file, "filename", "f", "", what+" to read; - reads stdin")
	cmd.Flags().StringVarP(&f.output, "output", "o", "yaml", "yaml (the objects or values to apply, the report on stderr) or json (one document: the objects or values and the report)")
	cmd.Flags().BoolVar(&f.dryRun, "dry-run", false, "print what would change against the cluster, as a diff, instead of the objects")
}

func (f *importFlags) addProvider(cmd *cobra.Command, def string) {
	cmd.Flags().StringVar(&f.provider, "provider", def, "the imported pools' provider: none, kwok, aws-asg, azure-vmss, aks-agentpool, gcp-mig or cluster-api")
	cmd.Flags().StringVar(&f.providerSettings, "provider-settings", "", "the provider's settings, as the NodePool's spec.provider.<provider> holds them: YAML or JSON, or @FILE (such as '{autoScalingGroups: [{name: eks-web}]}' for aws-asg)")
}

func newImportCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "import karpenter|nth|kured|aks",
		Short: "Translate Karpenter NodePools, aws-node-termination-handler, kured or AKS upgrade settings into sluice's",
		Long: `Import reads what the cluster runs today and writes the sluice settings that do the same: NodePools
(kubectl apply -f) or chart values (helm upgrade --values). Every field read either maps, or is
listed on stderr (in the document's report with -o json) as mapping with different semantics, or
as not mapped, with the reason. Nothing is written when an input is unreadable or the result would
not pass sluice's own validation (the NodePool CRD's schema and rules, and the controller's checks).

Migrate in this order (docs/import.md): save what you run, turn the old tool's disruption off for
those nodes, import from the saved copy, check with --dry-run, apply.`,
	}
	cmd.AddCommand(newImportKarpenterCommand(), newImportNTHCommand(), newImportKuredCommand(), newImportAKSCommand())
	return cmd
}

func newImportKarpenterCommand() *cobra.Command {
	var f importFlags
	cmd := &cobra.Command{
		Use:   "karpenter [NAME...]",
		Short: "Karpenter v1 NodePools (karpenter.sh/v1) to sluice NodePools",
		Long: `Reads Karpenter v1 NodePools from -f (one or more YAML documents, or a List), or from the cluster
when -f is not given (every NodePool, or the NAMEs), and writes a sluice NodePool for each: the same
name, selecting the nodes Karpenter launched for it (karpenter.sh/nodepool=NAME, or --selector),
with its disruption settings, budgets, template labels and taints, instance types, capacity type,
limits and do-not-disrupt. A Karpenter NodePool has no machine group: --provider (default none:
sluice then only drains for maintenance and reports what it would replace) and --provider-settings
say how sluice makes and removes the pool's machines.`,
		Example: `  sluice import karpenter -f nodepools.yaml
  sluice import karpenter spot --dry-run
  sluice import karpenter -f - --provider aws-asg --provider-settings '{autoScalingGroups: [{name: eks-spot}]}' --selector eks.amazonaws.com/nodegroup=spot`,
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := parseImportOutput(f.output)
			if err != nil {
				return err
			}
			prov, err := parseProvider(f.provider, f.providerSettings)
			if err != nil {
				return err
			}
			sel, err := parseLabels(f.selector)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var objects []map[string]any
			var cl importCluster
			if f.file != "" {
				if f.dryRun {
					if cl, err = clusterOrOffline(ctx, f.client); err != nil {
						return err
					}
				}
				raw, err := readImportInput(cmd.InOrStdin(), f.file)
				if err != nil {
					return err
				}
				if objects, err = decodeObjects(raw); err != nil {
					return fmt.Errorf("%s: %w", f.file, err)
				}
				objects = namedObjects(objects, args)
			} else {
				dyn, err := importClient(ctx, f.client)
				if err != nil {
					return fmt.Errorf("reading Karpenter's NodePools from the cluster (or give -f FILE): %w", err)
				}
				cl.dyn = dyn
				if objects, err = liveKarpenterPools(ctx, dyn, args); err != nil {
					return err
				}
			}
			if len(args) > 0 && len(objects) < len(args) {
				return fmt.Errorf("not every NodePool named was found (%s): %d of %d", strings.Join(args, ", "), len(objects), len(args))
			}
			res, err := importer.Karpenter(objects, importer.KarpenterOptions{Provider: prov, Selector: sel})
			if err != nil {
				return err
			}
			return finishImport(ctx, cmd, &f, format, res, cl)
		},
	}
	f.add(cmd, "a file of Karpenter NodePools", true)
	f.addProvider(cmd, "none")
	cmd.Flags().StringVarP(&f.selector, "selector", "l", "", "the imported pool's nodes, as labels KEY=VALUE[,KEY=VALUE] (default karpenter.sh/nodepool=NAME; one pool only)")
	return cmd
}

func newImportNTHCommand() *cobra.Command {
	var f importFlags
	cmd := &cobra.Command{
		Use:   "nth -f FILE",
		Short: "aws-node-termination-handler's Helm values, flags or env to sluice chart values",
		Long: `Reads an aws-node-termination-handler release's Helm values (helm get values RELEASE -o yaml), or
its flags (--enable-sqs-termination-draining=true ...) or environment (ENABLE_SQS_TERMINATION_DRAINING=true
...), one or more a line, and writes the sluice chart's values: queue mode (controller.awsQueueURL)
or the agent on each node (IMDS mode), the webhook, the region and role. What sluice sets per NodePool
(which events drain, cordon only, emptyDir pods) is reported with the pool field to set.`,
		Example: `  helm get values aws-node-termination-handler -n kube-system -o yaml | sluice import nth -f - > sluice-values.yaml
  sluice import nth -f nth-args.txt -o json`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := parseImportOutput(f.output)
			if err != nil {
				return err
			}
			if f.file == "" {
				return errors.New("give NTH's values or flags with -f FILE (or -f - for stdin): helm get values RELEASE -o yaml prints the values")
			}
			raw, err := readImportInput(cmd.InOrStdin(), f.file)
			if err != nil {
				return err
			}
			values, err := nthInput(raw)
			if err != nil {
				return fmt.Errorf("%s: %w", f.file, err)
			}
			res, err := importer.NTH(values)
			if err != nil {
				return err
			}
			return finishImport(cmd.Context(), cmd, &f, format, res, importCluster{offline: "chart values are not read from the cluster"})
		},
	}
	f.add(cmd, "NTH's Helm values, or its flags or env", false)
	return cmd
}

func newImportKuredCommand() *cobra.Command {
	var f importFlags
	cmd := &cobra.Command{
		Use:   "kured -f FILE --name POOL",
		Short: "kured's flags to a NodePool's spec.reboot (and the agent's chart values)",
		Long: `Reads kured's flags (--reboot-days=mo,tu --start-time=2:00 ...), its KURED_* environment, or its Helm
chart's values (the configuration map), and writes the NodePool --name with spec.reboot (window, time
zone, blocking pod selectors, Prometheus alerts) and a budget for RebootRequired of --concurrency
nodes. When the pool is in the cluster the rest of it is kept; otherwise --selector and --provider
make a new one (sluice reboots through the pool's provider, so provider none cannot). The agent's
sentinel settings (--reboot-sentinel, --period) are chart values: listed in the report, and in the
document with -o json.`,
		Example: `  sluice import kured -f kured-args.txt --name batch --dry-run
  sluice import kured -f kured-args.txt --name batch --selector agentpool=batch --provider kwok`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := parseImportOutput(f.output)
			if err != nil {
				return err
			}
			if f.file == "" {
				return errors.New("give kured's flags with -f FILE (or -f - for stdin): its DaemonSet's container args, one or more a line")
			}
			prov, err := parseProvider(f.provider, f.providerSettings)
			if err != nil {
				return err
			}
			sel, err := parseLabels(f.selector)
			if err != nil {
				return err
			}
			// The cluster first: the pool there, if any, is what the
			// settings go into.
			cl, err := clusterOrOffline(cmd.Context(), f.client)
			if err != nil {
				return err
			}
			opts := importer.KuredOptions{Name: f.name, Selector: sel, Provider: prov}
			if cl.dyn != nil && f.name != "" {
				if opts.Base, err = livePool(cmd.Context(), cl.dyn, f.name); err != nil {
					return err
				}
			}
			raw, err := readImportInput(cmd.InOrStdin(), f.file)
			if err != nil {
				return err
			}
			flags, err := kuredInput(raw)
			if err != nil {
				return fmt.Errorf("%s: %w", f.file, err)
			}
			res, err := importer.Kured(flags, opts)
			if err != nil {
				return err
			}
			return finishImport(cmd.Context(), cmd, &f, format, res, cl)
		},
	}
	f.add(cmd, "kured's flags, env or chart values", true)
	f.addProvider(cmd, "none")
	cmd.Flags().StringVar(&f.name, "name", "", "the NodePool the reboot settings go to")
	cmd.Flags().StringVarP(&f.selector, "selector", "l", "", "a new pool's nodes, as labels KEY=VALUE[,KEY=VALUE] (kured's DaemonSet's nodeSelector)")
	return cmd
}

func newImportAKSCommand() *cobra.Command {
	var f importFlags
	cmd := &cobra.Command{
		Use:   "aks -f FILE",
		Short: "An AKS agent pool's upgrade settings and node shape to a NodePool",
		Long: `Reads an agent pool as az aks nodepool show -o json prints it and writes a NodePool selecting its
nodes (kubernetes.azure.com/agentpool), with the aks-agentpool provider its id names (or --provider),
its labels, taints, VM size, priority, image and max pods as the template, and its upgradeSettings
(maxSurge, maxUnavailable, drainTimeoutInMinutes, nodeSoakDurationInMinutes, undrainableNodeBehavior,
maxBlockedNodes) as spec.upgrade.`,
		Example: `  az aks nodepool show -g RG --cluster-name C -n user -o json | sluice import aks -f -`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := parseImportOutput(f.output)
			if err != nil {
				return err
			}
			if f.file == "" {
				return errors.New("give the agent pool's JSON with -f FILE (or -f - for stdin): az aks nodepool show -g RG --cluster-name C -n POOL -o json")
			}
			var prov v1alpha1.ProviderSpec
			if f.provider != "" {
				if prov, err = parseProvider(f.provider, f.providerSettings); err != nil {
					return err
				}
			}
			var cl importCluster
			if f.dryRun {
				if cl, err = clusterOrOffline(cmd.Context(), f.client); err != nil {
					return err
				}
			}
			raw, err := readImportInput(cmd.InOrStdin(), f.file)
			if err != nil {
				return err
			}
			res, err := importer.AKS(raw, importer.AKSOptions{Provider: prov})
			if err != nil {
				return fmt.Errorf("%s: %w", f.file, err)
			}
			return finishImport(cmd.Context(), cmd, &f, format, res, cl)
		},
	}
	f.add(cmd, "the agent pool's JSON", true)
	f.addProvider(cmd, "")
	return cmd
}

// finishImport checks the pools as the API server and the controller
// would, then prints them (or their diff) and the report. Nothing is
// printed to stdout when a check fails.
func finishImport(ctx context.Context, cmd *cobra.Command, f *importFlags, format outputFormat, res *importer.Result, cl importCluster) error {
	if err := checkImported(ctx, res.NodePools); err != nil {
		return err
	}
	objects := make([]map[string]any, len(res.NodePools))
	for i := range res.NodePools {
		objects[i] = poolObject(&res.NodePools[i])
	}
	out := cmd.OutOrStdout()
	if f.dryRun {
		if err := writeImportDiff(ctx, out, cl, objects, res.Values); err != nil {
			return err
		}
		writeImportReport(cmd.ErrOrStderr(), res)
		return nil
	}
	if format == outputJSON {
		return writeStructured(out, outputJSON, importDocument{NodePools: objects, Values: res.Values, Report: res.Report})
	}
	var buf bytes.Buffer
	for i, o := range objects {
		if i > 0 {
			buf.WriteString("---\n")
		}
		b, err := yaml.Marshal(o)
		if err != nil {
			return err
		}
		buf.Write(b)
	}
	if len(objects) == 0 && len(res.Values) > 0 {
		b, err := yaml.Marshal(res.Values)
		if err != nil {
			return err
		}
		buf.WriteString("# sluice chart values (helm upgrade --install sluice charts/sluice --values FILE)\n")
		buf.Write(b)
	}
	if _, err := out.Write(buf.Bytes()); err != nil {
		return err
	}
	writeImportReport(cmd.ErrOrStderr(), res)
	return nil
}

// importDocument is what `sluice import ... -o json` prints. Its field
// names are part of the CLI contract.
type importDocument struct {
	NodePools []map[string]any `json:"nodePools"`
	Values    map[string]any   `json:"values,omitempty"`
	Report    []importer.Entry `json:"report"`
}

// checkImported refuses pools the API server or the controller would: the
// NodePool CRD's schema and rules, then nodepool.Validate.
func checkImported(ctx context.Context, pools []v1alpha1.NodePool) error {
	if len(pools) == 0 {
		return nil
	}
	v, err := nodePoolValidator()
	if err != nil {
		return err
	}
	var problems []string
	for i := range pools {
		obj := poolObject(&pools[i])
		for _, e := range v.Validate(ctx, obj) {
			problems = append(problems, fmt.Sprintf("NodePool %s: %s", pools[i].Name, e.Error()))
		}
		if p := nodepool.Validate(&pools[i], 0); p != nil {
			problems = append(problems, fmt.Sprintf("NodePool %s: %s", pools[i].Name, p.Message))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("the imported NodePools would be refused, so nothing was written:\n  %s", strings.Join(problems, "\n  "))
	}
	return nil
}

// nodePoolValidator reads the chart's NodePool CRD, the one helm installs.
func nodePoolValidator() (*crdschema.Validator, error) {
	for _, crd := range chart.CRDs() {
		if bytes.Contains(crd, []byte("name: nodepools."+v1alpha1.SchemeGroupVersion.Group)) {
			return crdschema.New(crd, v1alpha1.SchemeGroupVersion.Version)
		}
	}
	return nil, errors.New("the chart holds no NodePool CRD")
}

// poolObject is the pool as it would be applied: no status, no empty
// creation time.
func poolObject(p *v1alpha1.NodePool) map[string]any {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	if err != nil {
		panic(err) // A NodePool always converts.
	}
	delete(obj, "status")
	if md, ok := obj["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	return obj
}

// writeImportDiff prints, per pool, a unified diff from the cluster's pool
// (or from nothing, offline) to the imported one; chart values against
// nothing.
func writeImportDiff(ctx context.Context, out io.Writer, cl importCluster, objects []map[string]any, values map[string]any) error {
	dyn := cl.dyn
	if len(objects) > 0 && dyn == nil {
		fmt.Fprintf(out, "# offline (%s): each pool is diffed against nothing\n", cl.offline)
	}
	var crd *crdschema.Validator
	if len(objects) > 0 && dyn != nil {
		v, err := nodePoolValidator()
		if err != nil {
			return err
		}
		crd = v
	}
	for _, o := range objects {
		name, _ := o["metadata"].(map[string]any)["name"].(string)
		from, label := "", "none"
		if dyn != nil {
			live, err := dyn.Resource(v1alpha1.NodePoolResource).Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
			case err != nil:
				return fmt.Errorf("reading node pool %s: %w", name, err)
			default:
				b, err := yaml.Marshal(appliedFields(live.Object))
				if err != nil {
					return err
				}
				from, label = string(b), "cluster"
			}
		}
		applied := o
		if label == "cluster" {
			// The cluster's pool carries the defaults its CRD gave it when
			// it was applied: compare it with the imported pool as the API
			// server would store it, not with fields it would fill in.
			applied = runtime.DeepCopyJSON(o)
			crd.Default(applied)
		}
		to, err := yaml.Marshal(applied)
		if err != nil {
			return err
		}
		if err := writeDiff(out, "NodePool "+name+" ("+label+")", "NodePool "+name+" (imported)", from, string(to)); err != nil {
			return err
		}
	}
	if len(values) > 0 {
		to, err := yaml.Marshal(values)
		if err != nil {
			return err
		}
		fmt.Fprintln(out, "# chart values are diffed against nothing: sluice does not read a release's values from the cluster")
		return writeDiff(out, "values (none)", "values (imported)", "", string(to))
	}
	return nil
}

func writeDiff(out io.Writer, fromName, toName, from, to string) error {
	if from == to {
		fmt.Fprintf(out, "# %s: no change\n", toName)
		return nil
	}
	text, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(from), B: difflib.SplitLines(to), FromFile: fromName, ToFile: toName, Context: 3,
	})
	if err != nil {
		return err
	}
	_, err = io.WriteString(out, text)
	return err
}

// appliedFields is a live object as an import would write it: no status,
// and none of the metadata the API server keeps.
func appliedFields(obj map[string]any) map[string]any {
	out := runtime.DeepCopyJSON(obj)
	delete(out, "status")
	if md, ok := out["metadata"].(map[string]any); ok {
		for _, k := range []string{"creationTimestamp", "generation", "managedFields", "resourceVersion", "uid", "finalizers"} {
			delete(md, k)
		}
		if ann, ok := md["annotations"].(map[string]any); ok {
			delete(ann, "kubectl.kubernetes.io/last-applied-configuration")
			if len(ann) == 0 {
				delete(md, "annotations")
			}
		}
	}
	return out
}

// writeImportReport prints what became of each field, grouped by source.
func writeImportReport(w io.Writer, res *importer.Result) {
	mapped, differs := 0, 0
	for _, e := range res.Report {
		switch e.Status {
		case importer.Mapped:
			mapped++
		case importer.Differs:
			differs++
		}
	}
	fmt.Fprintf(w, "import: %d field(s) mapped, %d mapped with different semantics, %d not mapped\n", mapped, differs, res.NotMappedCount())
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	source := ""
	for _, e := range res.Report {
		if e.Source != source {
			source = e.Source
			fmt.Fprintf(tw, "%s:\n", source)
		}
		line := "  " + statusWord(e.Status) + "\t" + e.Field
		if e.Target != "" {
			line += " -> " + e.Target
		}
		if e.Reason != "" {
			line += ": " + e.Reason
		}
		fmt.Fprintln(tw, line)
	}
	_ = tw.Flush()
}

func statusWord(s importer.Status) string {
	switch s {
	case importer.Differs:
		return "differs"
	case importer.NotMapped:
		return "NOT MAPPED"
	}
	return "mapped"
}

func parseImportOutput(s string) (outputFormat, error) {
	switch f := outputFormat(s); f {
	case "", outputYAML, outputText:
		return outputYAML, nil
	case outputJSON:
		return f, nil
	}
	return "", fmt.Errorf("unknown --output %q: import prints yaml (the objects to apply) or json (the objects and the report)", s)
}

// parseProvider builds a ProviderSpec from --provider and its settings.
func parseProvider(name, settings string) (v1alpha1.ProviderSpec, error) {
	keys := map[v1alpha1.ProviderName]string{
		v1alpha1.ProviderKwok: "kwok", v1alpha1.ProviderAWSASG: "aws", v1alpha1.ProviderAzureVMSS: "azure",
		v1alpha1.ProviderAKS: "aks", v1alpha1.ProviderGCPMIG: "gcp", v1alpha1.ProviderClusterAPI: "clusterAPI",
	}
	p := v1alpha1.ProviderName(name)
	if name == "" {
		p = v1alpha1.ProviderNone
	}
	key, ok := keys[p]
	if !ok && p != v1alpha1.ProviderNone {
		return v1alpha1.ProviderSpec{}, fmt.Errorf("--provider %q: use none, kwok, aws-asg, azure-vmss, aks-agentpool, gcp-mig or cluster-api", name)
	}
	spec := v1alpha1.ProviderSpec{Name: p}
	if settings == "" {
		return spec, nil
	}
	if p == v1alpha1.ProviderNone {
		return spec, errors.New("--provider-settings needs --provider: provider none has no settings")
	}
	raw := []byte(settings)
	if strings.HasPrefix(settings, "@") {
		var err error
		if raw, err = os.ReadFile(settings[1:]); err != nil {
			return spec, fmt.Errorf("--provider-settings: %w", err)
		}
	}
	var body map[string]any
	if err := yaml.Unmarshal(raw, &body); err != nil {
		return spec, fmt.Errorf("--provider-settings: not YAML or JSON: %w", err)
	}
	b, err := json.Marshal(map[string]any{"name": p, key: body})
	if err != nil {
		return spec, err
	}
	if err := yaml.UnmarshalStrict(b, &spec); err != nil {
		return spec, fmt.Errorf("--provider-settings for %s (spec.provider.%s): %w", p, key, err)
	}
	return spec, nil
}

// parseLabels reads KEY=VALUE[,KEY=VALUE].
func parseLabels(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--selector %q: give labels as KEY=VALUE[,KEY=VALUE]", s)
		}
		out[k] = v
	}
	return out, nil
}

func readImportInput(stdin io.Reader, path string) ([]byte, error) {
	if path == "-" {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("reading stdin: %w", err)
		}
		return b, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %w", err)
	}
	return b, nil
}

// decodeObjects reads YAML or JSON documents into objects, the items of a
// List counted one by one.
func decodeObjects(raw []byte) ([]map[string]any, error) {
	var out []map[string]any
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for i := 1; ; i++ {
		var doc json.RawMessage
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		// As the API server reads JSON: whole numbers are integers.
		var obj map[string]any
		if err := utiljson.Unmarshal(doc, &obj); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if obj == nil {
			continue
		}
		if items, ok := obj["items"].([]any); ok && strings.HasSuffix(fmt.Sprint(obj["kind"]), "List") {
			for _, it := range items {
				if m, ok := it.(map[string]any); ok {
					out = append(out, m)
				}
			}
			continue
		}
		out = append(out, obj)
	}
	if len(out) == 0 {
		return nil, errors.New("no objects in the input")
	}
	return out, nil
}

// namedObjects keeps the objects named, all when none is.
func namedObjects(objects []map[string]any, names []string) []map[string]any {
	if len(names) == 0 {
		return objects
	}
	var out []map[string]any
	for _, o := range objects {
		md, _ := o["metadata"].(map[string]any)
		for _, n := range names {
			if md != nil && md["name"] == n {
				out = append(out, o)
			}
		}
	}
	return out
}

func importClient(ctx context.Context, flags kube.ClientFlags) (dynamic.Interface, error) {
	_, cfg, err := flags.Client(ctx)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building a client: %w", err)
	}
	return dyn, nil
}

func liveKarpenterPools(ctx context.Context, dyn dynamic.Interface, names []string) ([]map[string]any, error) {
	list, err := dyn.Resource(karpenterNodePools).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil, errors.New("the cluster serves no Karpenter v1 NodePools (karpenter.sh/v1 nodepools): give -f FILE")
	}
	if err != nil {
		return nil, fmt.Errorf("listing Karpenter's NodePools: %w", err)
	}
	objects := make([]map[string]any, 0, len(list.Items))
	for _, it := range list.Items {
		objects = append(objects, it.Object)
	}
	if len(objects) == 0 {
		return nil, errors.New("the cluster has no Karpenter NodePools")
	}
	return namedObjects(objects, names), nil
}

// livePool is the sluice NodePool of that name in the cluster; nil when it
// is not there (the import then makes a new one).
func livePool(ctx context.Context, dyn dynamic.Interface, name string) (*v1alpha1.NodePool, error) {
	u, err := dyn.Resource(v1alpha1.NodePoolResource).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading node pool %s: %w", name, err)
	}
	var p v1alpha1.NodePool
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
		return nil, fmt.Errorf("decoding node pool %s: %w", name, err)
	}
	return &p, nil
}

// nthInput reads NTH's Helm values (a YAML map), or its flags or env.
func nthInput(raw []byte) (map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, errors.New("the input is empty: give NTH's values (helm get values RELEASE -o yaml) or its flags")
	}
	var values map[string]any
	if err := yaml.Unmarshal(raw, &values); err == nil && values != nil && !looksLikeArgs(raw) {
		return values, nil
	}
	return importer.ParseNTHArgs(string(raw))
}

// kuredInput reads kured's flags or env, or its chart's values.
func kuredInput(raw []byte) (map[string][]string, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, errors.New("the input is empty: give kured's flags, one or more a line")
	}
	var values map[string]any
	if err := yaml.Unmarshal(raw, &values); err == nil && values != nil && !looksLikeArgs(raw) {
		conf, ok := values["configuration"].(map[string]any)
		if !ok {
			return nil, errors.New("a YAML map without a configuration key: give kured's chart values (configuration: {rebootDays: ...}) or its flags (--reboot-days=...)")
		}
		return importer.KuredChartValues(conf), nil
	}
	return importer.ParseKuredArgs(string(raw))
}

// looksLikeArgs says the input is flags or env lines, which can also parse
// as YAML (a list, or KEY=VALUE as a string).
func looksLikeArgs(raw []byte) bool {
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "- "))
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		return strings.HasPrefix(line, "-") || (strings.Contains(line, "=") && !strings.Contains(strings.SplitN(line, "=", 2)[0], ":"))
	}
	return false
}
