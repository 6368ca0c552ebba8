package simulate

import "k8s.io/apimachinery/pkg/api/resource"

type resourceQuantity = resource.Quantity

func mustParse(s string) resource.Quantity { return resource.MustParse(s) }
