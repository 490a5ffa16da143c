package main

import (
	"path/filepath"

	"github.com/spf13/pflag"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
)

// worktreeFlags are baton run's flags that put a new thread on a git
// worktree of its own.
type worktreeFlags struct {
	on                               bool
	branch, base, dir, setup, author string
	copy                             []string
}

// worktreeFlagNames are the flags that only mean something with
// --worktree.
var worktreeFlagNames = []string{"branch", "base", "worktree-dir", "copy", "setup", "author"}

func addWorktreeFlags(fs *pflag.FlagSet, f *worktreeFlags) {
	fs.BoolVar(&f.on, "worktree", false, "put the new thread on a git worktree of its own, on a new branch, of the repository --cwd is in")
	fs.StringVar(&f.branch, "branch", "", "with --worktree: the new branch's `name` (default: baton/<short thread id>; with several providers, NAME-<provider>)")
	fs.StringVar(&f.base, "base", "", "with --worktree: the `ref` the branch starts at: a branch, tag or commit (default: the repository's HEAD)")
	fs.StringVar(&f.dir, "worktree-dir", "", "with --worktree: the `directory` the worktree is made in (default: DATA/worktrees)")
	fs.StringArrayVar(&f.copy, "copy", nil, "with --worktree: copy the files matching this `glob` (relative to the repository's top: .env, local config) into the new worktree (repeatable)")
	fs.StringVar(&f.setup, "setup", "", "with --worktree: a shell `command` run in the new worktree before the first run (a failure fails that run, with its output)")
	fs.StringVar(&f.author, "author", "", "with --worktree: the run commits' `author`, \"Name <email>\" (default: your git config's)")
}

// check refuses the worktree flags where they cannot apply: on a thread
// that goes on (--thread), or without --worktree. given says which flags
// the command line (or the environment) set.
func (f *worktreeFlags) check(given func(name string) bool, continued bool) error {
	if continued {
		for _, name := range append([]string{"worktree"}, worktreeFlagNames...) {
			if given(name) {
				return usagef("run: --%s is a new thread's; a thread that goes on (--thread) keeps its directory", name)
			}
		}
		return nil
	}
	if f.on {
		return nil
	}
	for _, name := range worktreeFlagNames {
		if given(name) {
			return usagef("run: --%s needs --worktree", name)
		}
	}
	return nil
}

// options are the CreateThreadRequest's worktree options for a thread on
// provider (nil: no --worktree). With several providers (many), a --branch
// NAME becomes NAME-<provider>, so that each thread has its own.
func (f *worktreeFlags) options(provider string, many bool) (*batonv1.WorktreeOptions, error) {
	if !f.on {
		return nil, nil
	}
	o := &batonv1.WorktreeOptions{Branch: f.branch, Base: f.base, Copy: f.copy, Setup: f.setup, Author: f.author}
	if many && o.Branch != "" {
		o.Branch += "-" + provider
	}
	if f.dir != "" {
		dir, err := filepath.Abs(f.dir)
		if err != nil {
			return nil, usagef("run: --worktree-dir: %v", err)
		}
		o.Dir = dir
	}
	return o, nil
}
