// Package e2e runs sluice's binary the way a person does, against sandboxes it
// starts itself.
package e2e
