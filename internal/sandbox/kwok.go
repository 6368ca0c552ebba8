package sandbox

import _ "embed" // the kwok configuration ships inside the binary

//go:embed kwok.yaml
var kwokConfig []byte
