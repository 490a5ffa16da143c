package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// How a flag gets its value: from the command line, else from its
// environment variable (BATON_ and its name) on the verbs where the flag
// means what the variable is documented for; and what a value that does
// not parse is told, in words.

// envVerbs scopes the variables of the flags whose name means another
// thing on another verb, or that must not change a thread that goes on:
// each applies on the verbs named here only (none: on no verb). Every
// other flag's variable applies wherever the flag is. Help shows a
// flag's variable where it applies, and nowhere else.
var envVerbs = func() map[string][]string {
	m := map[string][]string{
		// A new thread's: on switch and send --provider switches a thread
		// that goes on, and on threads it is a filter.
		"provider": {"run"}, "model": {"run"}, "provider-command": {"run"}, "handoff-max-bytes": {"run"}, "agent": {"run"},
		// A run ordinal, on every verb that has it.
		"run": {"diff", "rollback", "cancel", "send", "interrupt"},
		// Ending a provider's process at once is asked for each time, on
		// the command line.
		"force": nil,
		// A thread id on threads, a sequence on watch: neither.
		"after": nil,
		// A run's MCP servers, and a server's parts (mcp add), are
		// given each time on the command line.
		"mcp": nil, "no-mcp": nil, "env": nil, "env-file": nil, "header": nil, "url": nil,
	}
	// A new thread's policy and worktree: send continues a thread.
	for _, name := range append(append([]string{"worktree"}, worktreeFlagNames...), policyFlagNames...) {
		m[name] = []string{"run"}
	}
	return m
}()

// envName is the environment variable of a flag: --token-file is
// BATON_TOKEN_FILE.
func envName(flag string) string {
	return "BATON_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// verbOf is a command's verb as envVerbs names it: its path below the
// root ("run", "plugin install").
func verbOf(cmd *cobra.Command) string {
	var names []string
	for c := cmd; c != nil && (c.HasParent() || c == cmd); c = c.Parent() {
		names = append([]string{c.Name()}, names...)
	}
	return strings.Join(names, " ")
}

// envApplies says whether flag's variable sets it on verb.
func envApplies(verb, flag string) bool {
	if flag == "help" || flag == "version" {
		return false
	}
	verbs, scoped := envVerbs[flag]
	return !scoped || slices.Contains(verbs, verb)
}

// applyEnv sets each flag of cmd not given on the command line from its
// environment variable, where that applies.
func applyEnv(cmd *cobra.Command) error {
	var err error
	verb := verbOf(cmd)
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || !envApplies(verb, f.Name) {
			return
		}
		v, ok := os.LookupEnv(envName(f.Name))
		if !ok {
			return
		}
		vals := []string{v}
		if t := f.Value.Type(); strings.HasSuffix(t, "Array") || strings.HasSuffix(t, "Slice") {
			vals = strings.Split(v, ",")
		}
		for _, v := range vals {
			if e := f.Value.Set(v); e != nil {
				err = usagef("%s: %s=%q (for --%s): %s", verb, envName(f.Name), v, f.Name, valueWant(f, e))
				return
			}
		}
		f.Changed = true
		if f.Annotations == nil {
			f.Annotations = map[string][]string{}
		}
		f.Annotations[fromEnvAnnotation] = []string{envName(f.Name)}
	})
	return err
}

// fromEnvAnnotation marks a flag applyEnv set from the environment.
const fromEnvAnnotation = "baton_from_env"

// fromEnv says whether the flag was set from the environment, not the
// command line.
func fromEnv(fs *pflag.FlagSet, name string) bool {
	f := fs.Lookup(name)
	return f != nil && f.Annotations[fromEnvAnnotation] != nil
}

// annotateEnv adds each flag's environment variable to its help, on the
// verbs where it applies. A persistent flag is one flag on every verb:
// it is annotated once (no persistent flag is scoped).
func annotateEnv(root *cobra.Command) {
	seen := map[*pflag.Flag]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		verb := verbOf(c)
		for _, fs := range []*pflag.FlagSet{c.PersistentFlags(), c.LocalNonPersistentFlags(), c.Flags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				if seen[f] || !envApplies(verb, f.Name) {
					return
				}
				seen[f] = true
				f.Usage += " [$" + envName(f.Name) + "]"
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// flagError is the root's flag error function: a value that does not
// parse is a usage error that says what the flag takes; the rest of
// pflag's errors (an unknown flag, a value missing) read well as they are.
func flagError(cmd *cobra.Command, err error) error {
	var bad *pflag.InvalidValueError
	if errors.As(err, &bad) {
		f := bad.GetFlag()
		return usagef("%s: --%s %q: %s", verbOf(cmd), f.Name, bad.GetValue(), valueWant(f, errors.Unwrap(err)))
	}
	return err
}

// valueWant says what flag f takes, after err refused a value: pflag's
// own types in words (their errors are strconv's and time's); a type of
// ours says it in its error.
func valueWant(f *pflag.Flag, err error) string {
	var what string
	switch f.Value.Type() {
	case "int", "int64", "uint32", "uint64":
		what = "give a whole number"
		if strings.HasPrefix(f.Value.Type(), "uint") {
			what += " from 0"
		}
	case "float64":
		what = "give a number, like 2 or 0.5"
	case "duration":
		what = "give a duration, like 90s, 10m or 1h30m"
	case "bool":
		what = "give true or false"
	default:
		return err.Error()
	}
	if errors.Is(err, strconv.ErrRange) {
		return fmt.Sprintf("out of range: %s that fits", what)
	}
	return what
}
