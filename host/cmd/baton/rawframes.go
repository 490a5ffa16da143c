package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/baton-run/baton/host/internal/rawframes"
)

// addRawFramesFlags declares the flags of the raw-frame logs the host a
// command runs keeps (embedded, or baton serve): whether, how much, how
// long.
func addRawFramesFlags(fs *pflag.FlagSet, p *rawframes.Policy) {
	fs.Var(onOff{&p.Off}, "raw-frames", "keep each provider session's raw frames, every line to and from the agent (full prompts "+
		"and answers), in DATA/rawframes (files 0600), to diagnose a provider or plugin; off keeps none: the thread's events are "+
		"the same, but the provider's exact wire traffic is lost (for the host this command runs: embedded, or baton serve)")
	fs.Var(sizeBound{&p.MaxBytes}, "raw-frames-max-bytes", "delete the oldest raw-frame logs once together they take more than this "+
		"(like 256MiB or 1GiB, or none); an open session's logs are kept, and take at most 16MiB each")
	fs.Var(ageBound{&p.MaxAge}, "raw-frames-max-age", "delete raw-frame logs last written longer ago than this (like 14d or 36h, or none)")
}

// onOff is --raw-frames: on or off.
type onOff struct{ off *bool }

func (v onOff) String() string {
	if v.off != nil && *v.off {
		return "off"
	}
	return "on"
}

func (v onOff) Set(s string) error {
	switch s {
	case "on":
		*v.off = false
	case "off":
		*v.off = true
	default:
		return fmt.Errorf("give on or off, not %q", s)
	}
	return nil
}

func (onOff) Type() string { return "on|off" }

// sizeBound is a size bound: 0 is the default, negative none.
type sizeBound struct{ n *int64 }

func (v sizeBound) String() string {
	if v.n == nil || *v.n == 0 {
		return rawframes.FormatSize(rawframes.DefaultMaxBytes)
	}
	return rawframes.FormatSize(*v.n)
}

func (v sizeBound) Set(s string) error {
	n, err := rawframes.ParseSize(s)
	if err != nil && s == "0" {
		return fmt.Errorf("%w (to keep no raw frames: --raw-frames off)", err)
	}
	if err != nil {
		return err
	}
	*v.n = n
	return nil
}

func (sizeBound) Type() string { return "size" }

// ageBound is an age bound: 0 is the default, negative none.
type ageBound struct{ d *time.Duration }

func (v ageBound) String() string {
	if v.d == nil || *v.d == 0 {
		return rawframes.FormatAge(rawframes.DefaultMaxAge)
	}
	return rawframes.FormatAge(*v.d)
}

func (v ageBound) Set(s string) error {
	d, err := rawframes.ParseAge(s)
	if err != nil {
		return err
	}
	*v.d = d
	return nil
}

func (ageBound) Type() string { return "age" }
