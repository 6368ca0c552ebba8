package cli

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"

	"github.com/spf13/cobra"
)

// profileFlags are kubectl's --profile and --profile-output: a Go profile of
// this one command, for a person who wants to say where a slow `sluice
// doctor` spends its time. The controller serves its profiles instead
// (--profiling).
type profileFlags struct {
	name, output string
	file         *os.File
}

func (p *profileFlags) register(root *cobra.Command) {
	fs := root.PersistentFlags()
	fs.StringVar(&p.name, "profile", "none", "write a Go profile of this command: none, cpu, heap, goroutine, threadcreate, block or mutex")
	fs.StringVar(&p.output, "profile-output", "profile.pprof", "the file --profile writes")
	root.PersistentPreRunE = func(*cobra.Command, []string) error { return p.start() }
}

func (p *profileFlags) start() error {
	switch p.name {
	case "none":
		return nil
	case "cpu", "heap", "goroutine", "threadcreate", "block", "mutex":
	default:
		return fmt.Errorf("--profile=%q: want none, cpu, heap, goroutine, threadcreate, block or mutex", p.name)
	}
	f, err := os.Create(p.output)
	if err != nil {
		return fmt.Errorf("--profile-output: %w", err)
	}
	p.file = f
	switch p.name {
	case "cpu":
		if err := pprof.StartCPUProfile(f); err != nil {
			return errors.Join(err, f.Close())
		}
	case "block":
		runtime.SetBlockProfileRate(1)
	case "mutex":
		runtime.SetMutexProfileFraction(1)
	}
	return nil
}

// stop writes the profile; it runs whether the command succeeded or not
// (a doctor with findings exits 3, and is the one worth profiling).
func (p *profileFlags) stop() error {
	if p.file == nil {
		return nil
	}
	defer func() { p.file = nil }()
	var err error
	if p.name == "cpu" {
		pprof.StopCPUProfile()
	} else {
		if p.name == "heap" {
			runtime.GC()
		}
		err = pprof.Lookup(p.name).WriteTo(p.file, 0)
	}
	return errors.Join(err, p.file.Close())
}
