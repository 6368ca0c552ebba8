package azurevmss

import (
	"encoding/base64"
	"strings"

	"github.com/sluice-dev/sluice/pkg/contract"
)

// RegistersUnregisteredTaint says whether a scale set model's user data
// (virtualMachineProfile.userData, base64 as Azure returns it with
// $expand=userData, or already decoded) starts the kubelet with
// --register-with-taints naming contract.TaintUnregistered, so that a new
// instance's Node holds no pod until the controller has made it what its
// pool says. The provider never writes it there: the model's customData
// cannot be read back from Azure, and an AKS node pool's set is AKS's, so
// the taint is the user's to set (on AKS, the node pool's
// --node-initialization-taints). A gzip-compressed user data is not read.
func RegistersUnregisteredTaint(userData string) bool {
	text := userData
	if b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(userData)); err == nil {
		text = string(b)
	}
	words := strings.FieldsFunc(text, func(r rune) bool { return strings.ContainsRune(" \t\r\n\"'", r) })
	for i, w := range words {
		value, ok := strings.CutPrefix(w, "--register-with-taints=")
		if !ok && w == "--register-with-taints" && i+1 < len(words) {
			value, ok = words[i+1], true
		}
		if !ok {
			continue
		}
		for _, taint := range strings.Split(value, ",") {
			// key=value:Effect or key:Effect
			if key, _, _ := strings.Cut(strings.SplitN(taint, ":", 2)[0], "="); key == contract.TaintUnregistered {
				return true
			}
		}
	}
	return false
}
