package gcpmig

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-dev/sluice/internal/provider"
)

// template is what the provider reads of an instance template.
type template struct {
	project, name string
	machineType   string
	image         string // the boot disk's initializeParams.sourceImage
	spot          bool
	metadata      map[string]string
	labels        map[string]string
	raw           *computepb.InstanceTemplate
}

// templateURL reads a global instance template's URL, full or partial.
var templateURL = regexp.MustCompile(`(?:^|/)projects/([^/]+)/global/instanceTemplates/([^/]+)$`)

// template reads the instance template at url; templates never change, so
// each is read once.
func (p *Provider) template(ctx context.Context, project, url string) (*template, error) {
	p.mu.Lock()
	t, ok := p.templates[url]
	p.mu.Unlock()
	if ok {
		return t, nil
	}
	m := templateURL.FindStringSubmatch(url)
	if m == nil {
		return nil, &provider.Error{Code: provider.CodeInvalidTemplate, Message: fmt.Sprintf(
			"instance template %s is not a global one: gcp-mig reads global instance templates only", url)}
	}
	raw, err := p.clients.templates.Get(ctx, &computepb.GetInstanceTemplateRequest{Project: m[1], InstanceTemplate: m[2]})
	if err != nil {
		return nil, refusal("reading instance template "+m[2], err)
	}
	t = templateOf(m[1], raw)
	p.mu.Lock()
	p.templates[url] = t
	p.mu.Unlock()
	return t, nil
}

func templateOf(project string, raw *computepb.InstanceTemplate) *template {
	props := raw.GetProperties()
	t := &template{project: project, name: raw.GetName(), machineType: lastSegment(props.GetMachineType()),
		metadata: map[string]string{}, labels: props.GetLabels(), raw: raw}
	if boot := bootDisk(raw); boot != nil {
		t.image = boot.GetInitializeParams().GetSourceImage()
	}
	s := props.GetScheduling()
	t.spot = s.GetProvisioningModel() == "SPOT" || s.GetPreemptible()
	for _, it := range props.GetMetadata().GetItems() {
		t.metadata[it.GetKey()] = it.GetValue()
	}
	return t
}

func bootDisk(t *computepb.InstanceTemplate) *computepb.AttachedDisk {
	for _, d := range t.GetProperties().GetDisks() {
		if d.GetBoot() {
			return d
		}
	}
	return nil
}

// useImage makes the group create its new instances from a copy of its
// template that boots image, leaving its instances as they are. The copy
// is named after the template and the image, so a retry finds the one it
// made; a group that would replace its instances with it (updatePolicy
// PROACTIVE) is refused.
func (p *Provider) useImage(ctx context.Context, g ref, igm *computepb.InstanceGroupManager, t *template, image string) error {
	if typ := igm.GetUpdatePolicy().GetType(); typ != "OPPORTUNISTIC" {
		return &provider.Error{Code: provider.CodeInvalidTemplate, Message: fmt.Sprintf(
			"group %s's updatePolicy.type is %s: a new instance template would make Compute Engine replace every instance of the group; "+
				"set it to OPPORTUNISTIC (gcloud compute instance-groups managed rolling-action stop-proactive-update) for gcp-mig to set the pool's image", g, typ)}
	}
	if bootDisk(t.raw) == nil || bootDisk(t.raw).GetInitializeParams() == nil {
		return &provider.Error{Code: provider.CodeInvalidTemplate, Message: fmt.Sprintf(
			"instance template %s has no boot disk made from an image, so gcp-mig cannot set the pool's image %s", t.name, image)}
	}
	name := imageTemplateName(t.name, image)
	_, err := p.clients.templates.Get(ctx, &computepb.GetInstanceTemplateRequest{Project: t.project, InstanceTemplate: name})
	switch {
	case isNotFound(err):
		c := proto.Clone(t.raw).(*computepb.InstanceTemplate)
		c.Id, c.SelfLink, c.CreationTimestamp, c.Kind = nil, nil, nil, nil
		c.Name = proto.String(name)
		c.Description = proto.String(fmt.Sprintf("%s with boot image %s (made by sluice's gcp-mig provider)", t.name, image))
		bootDisk(c).GetInitializeParams().SourceImage = proto.String(image)
		op, err := p.clients.templates.Insert(ctx, &computepb.InsertInstanceTemplateRequest{Project: t.project, InstanceTemplateResource: c})
		if err := p.done(ctx, "making instance template "+name, ref{project: t.project}, op, err); err != nil && !isAlreadyExists(err) {
			return err
		}
		p.opts.Log.Info("instance template made", "template", name, "image", image, "from", t.name)
	case err != nil:
		return refusal("reading instance template "+name, err)
	}
	return p.setTemplate(ctx, g, "projects/"+t.project+"/global/instanceTemplates/"+name)
}

// imageSuffix ends the name of a template gcp-mig made for an image.
var imageSuffix = regexp.MustCompile(`-i[0-9a-f]{8}$`)

// imageTemplateName is the name of the copy of the template booting image:
// the template's own name (without the suffix of an earlier copy), "-i" and
// eight hexadecimal digits of the image's hash, at most 63 characters.
func imageTemplateName(template, image string) string {
	base := imageSuffix.ReplaceAllString(template, "")
	sum := sha256.Sum256([]byte(image))
	suffix := "-i" + hex.EncodeToString(sum[:4])
	if len(base) > 63-len(suffix) {
		base = strings.TrimRight(base[:63-len(suffix)], "-")
	}
	return base + suffix
}

// An image, as spec.template.image names it and Machine.Image reports it,
// is what an instance template's boot disk takes as sourceImage
// (compute/v1 instanceTemplates, AttachedDiskInitializeParams.sourceImage):
// an image, projects/P/global/images/NAME, or the latest image of a
// family, projects/P/global/images/family/FAMILY, either also as a full
// URL. A family is resolved when each instance is created, so its Nodes
// show the family, not the image they booted.
var imageForm = regexp.MustCompile(`^(?:https://(?:www|compute)\.googleapis\.com/compute/v1/)?projects/[a-z][-a-z0-9.:]*[a-z0-9]/global/images/(?:family/)?[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$`)

// CheckImage says whether image is in a form an instance template takes
// ("" is: the group's template stays as it is).
func CheckImage(image string) error {
	if image == "" || imageForm.MatchString(image) {
		return nil
	}
	return &provider.Error{Code: provider.CodeInvalidTemplate, Message: fmt.Sprintf(
		"gcp-mig takes no image %q: name an image projects/PROJECT/global/images/NAME or an image family projects/PROJECT/global/images/family/FAMILY "+
			"(gcloud compute images list --uri)", image)}
}
