package awsasg

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/pkg/contract"
)

// A provider's new machine registers with contract.TaintUnregistered
// (NoExecute) so that no pod lands on it before the controller has made it
// what its pool says. On EKS the taint is a kubelet flag in the user data,
// in one of three forms:
//
//   - AL2023: nodeadm reads a MIME multi-part document whose
//     application/node.eks.aws parts are NodeConfig documents, merged in
//     order. Its merge appends spec.kubelet.flags of every part (nodeadm's
//     internal/api/merge.go: "kubelet flags are parsed using pflag, where
//     flag order determines precedence ... we choose to explicitly append
//     slices for this field"), and the kubelet keeps the last
//     --register-with-taints it is given (RegisterWithTaintsVar.Set replaces
//     the list) while --node-labels accumulate. So a part that sluice adds
//     repeats the taints an earlier part registers, and adds its own.
//   - AL2: /etc/eks/bootstrap.sh --kubelet-extra-args '--register-with-taints=...'.
//   - Bottlerocket: TOML settings, [settings.kubernetes.node-taints].
//
// Only the first can be added to safely without knowing the rest of the
// document, so aws-asg adds the taint to AL2023 user data and launches any
// other unchanged; RegistersUnregisteredTaint tells `sluice doctor` whether
// a launch template already registers it.

// unregisteredTaint is the taint as a kubelet flag writes it.
var unregisteredTaint = contract.TaintUnregistered + "=true:NoExecute"

// nodeConfigType is the MIME type of a nodeadm NodeConfig part.
const nodeConfigType = "application/node.eks.aws"

// withUnregisteredTaint returns AL2023 user data (decoded) with one more
// NodeConfig part registering the kubelet with the unregistered taint, and
// true; user data of another kind, or one that registers it already, comes
// back as it is, with false.
func withUnregisteredTaint(userData string) (string, bool) {
	doc, ok := parseMIME(userData)
	if !ok || !slices.ContainsFunc(doc.parts, func(p mimePart) bool { return p.mediaType == nodeConfigType }) {
		return userData, false
	}
	taints := doc.lastFlag("--register-with-taints")
	if hasUnregisteredTaint(taints) {
		return userData, false
	}
	if taints != "" {
		taints += ","
	}
	taints += unregisteredTaint
	nl := "\n"
	if strings.Contains(userData, "\r\n") {
		nl = "\r\n"
	}
	part := strings.Join([]string{
		"--" + doc.boundary,
		"Content-Type: " + nodeConfigType,
		"",
		"---",
		"apiVersion: node.eks.aws/v1alpha1",
		"kind: NodeConfig",
		"spec:",
		"  kubelet:",
		"    flags:",
		"      - --register-with-taints=" + taints,
		"",
	}, nl)
	closing := "--" + doc.boundary + "--"
	i := strings.LastIndex(userData, closing)
	if i < 0 {
		return userData, false
	}
	return userData[:i] + part + userData[i:], true
}

// RegistersUnregisteredTaint says whether user data (decoded) registers the
// kubelet with the unregistered taint (contract.TaintUnregistered, NoExecute)
// in any of the forms EKS nodes read: a nodeadm NodeConfig's kubelet flags,
// bootstrap.sh's --kubelet-extra-args (alone or in a MIME part), or
// Bottlerocket's [settings.kubernetes.node-taints]. A launch template whose
// user data does not, and is not AL2023's (to which aws-asg adds it), makes
// Nodes that take pods before the controller has registered them.
func RegistersUnregisteredTaint(userData string) bool {
	if doc, ok := parseMIME(userData); ok {
		if hasUnregisteredTaint(doc.lastFlag("--register-with-taints")) {
			return true
		}
		return slices.ContainsFunc(doc.parts, func(p mimePart) bool {
			return p.mediaType != nodeConfigType && registersInScript(p.body)
		})
	}
	return registersInScript(userData) || registersInBottlerocket(userData)
}

// kubeletExtraArgsTaints finds --register-with-taints in bootstrap.sh's
// --kubelet-extra-args, quoted or not.
var kubeletExtraArgsTaints = regexp.MustCompile(`--kubelet-extra-args[= ]+["']?[^"'\n]*--register-with-taints[= ]([^\s"']+)`)

func registersInScript(script string) bool {
	for _, m := range kubeletExtraArgsTaints.FindAllStringSubmatch(script, -1) {
		if hasUnregisteredTaint(m[1]) {
			return true
		}
	}
	return false
}

// registersInBottlerocket reads the node-taints table of Bottlerocket's
// settings: "key" = ["value:Effect", ...].
func registersInBottlerocket(settings string) bool {
	in := false
	sc := bufio.NewScanner(strings.NewReader(settings))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			in = strings.Trim(line, "[] ") == "settings.kubernetes.node-taints"
			continue
		}
		key, values, ok := strings.Cut(line, "=")
		if !in || !ok || strings.Trim(strings.TrimSpace(key), `"`) != contract.TaintUnregistered {
			continue
		}
		if strings.Contains(values, ":NoExecute") {
			return true
		}
	}
	return false
}

// hasUnregisteredTaint says whether a --register-with-taints value holds the
// unregistered taint with the NoExecute effect.
func hasUnregisteredTaint(taints string) bool {
	for _, t := range strings.Split(taints, ",") {
		keyValue, effect, _ := strings.Cut(strings.TrimSpace(t), ":")
		key, _, _ := strings.Cut(keyValue, "=")
		if key == contract.TaintUnregistered && effect == "NoExecute" {
			return true
		}
	}
	return false
}

type mimeDoc struct {
	boundary string
	parts    []mimePart
}

type mimePart struct {
	mediaType string
	body      string
}

// parseMIME reads a MIME multi-part document as nodeadm and cloud-init do
// (net/mail headers, then mime/multipart); false when it is not one.
func parseMIME(text string) (mimeDoc, bool) {
	msg, err := mail.ReadMessage(strings.NewReader(text))
	if err != nil {
		return mimeDoc{}, false
	}
	mediaType, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(mediaType, "multipart/") || params["boundary"] == "" {
		return mimeDoc{}, false
	}
	doc := mimeDoc{boundary: params["boundary"]}
	r := multipart.NewReader(msg.Body, doc.boundary)
	for {
		p, err := r.NextPart()
		if errors.Is(err, io.EOF) {
			return doc, true
		}
		if err != nil {
			return mimeDoc{}, false
		}
		body, err := io.ReadAll(p)
		if err != nil {
			return mimeDoc{}, false
		}
		mt, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
		doc.parts = append(doc.parts, mimePart{mediaType: mt, body: string(body)})
	}
}

// nodeConfig is the part of a NodeConfig read here.
type nodeConfig struct {
	Spec struct {
		Kubelet struct {
			Flags []string `json:"flags"`
		} `json:"kubelet"`
	} `json:"spec"`
}

// lastFlag is the value of the last kubelet flag named name in the
// document's NodeConfig parts, in nodeadm's merge order; "" when none sets
// it.
func (d mimeDoc) lastFlag(name string) string {
	var value string
	for _, p := range d.parts {
		if p.mediaType != nodeConfigType {
			continue
		}
		for _, y := range bytes.Split([]byte(p.body), []byte("\n---")) {
			var nc nodeConfig
			if yaml.Unmarshal(y, &nc) != nil {
				continue
			}
			for _, f := range nc.Spec.Kubelet.Flags {
				if v, ok := strings.CutPrefix(f, name+"="); ok {
					value = v
				}
			}
		}
	}
	return value
}
