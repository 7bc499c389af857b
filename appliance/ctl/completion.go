package ctl

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

const completionUsage = "completion bash"

// What a flag's value or a positional argument completes to.
const (
	none = ""     // a flag without a value; no positional argument
	word = "word" // anything: nothing to offer
	file = "file"
	dir  = "dir"
)

// compVerb is one verb (or verb and sub-verb) for the completion script.
type compVerb struct {
	path  string            // "config apply"
	subs  []string          // sub-verbs, when the verb has them
	flags map[string]string // --flag -> what its value completes to
	arg   string            // what the positional argument completes to
}

// globalFlags are Main's flags, valid before or after any verb.
var globalFlags = map[string]string{"--socket": file, "--server": word, "--cert": file, "--key": file,
	"--ca": file, "--json": none, "--timeout": word}

// verbs is the command tree the completion script offers; keep it in
// step with usage (TestCompletionCoversUsage).
var verbs = []compVerb{
	{path: "", subs: []string{"status", "registrations", "services", "voicemail", "calls", "route", "interfaces", "cdr", "media-resources",
		"drain", "trace", "config", "fleet", "pki", "firmware", "completion"}},
	{path: "route", arg: word},
	{path: "cdr", flags: map[string]string{"--since": word, "--limit": word}},
	{path: "media-resources", subs: []string{"matrix", "set"}},
	{path: "media-resources set", arg: word},
	{path: "drain", flags: map[string]string{"--wait": none, "--cancel": none}},
	{path: "trace", flags: map[string]string{"--filter": word, "--pcap": file, "--count": word, "--duration": word}},
	{path: "config", subs: []string{"get", "apply", "history", "rollback"}},
	{path: "config get", flags: map[string]string{"--version": word}},
	{path: "config apply", arg: file, flags: map[string]string{"--dry-run": none, "--if-match": word}},
	{path: "config rollback", arg: word},
	{path: "fleet", subs: []string{"push"}},
	{path: "fleet push", arg: file, flags: map[string]string{"--hosts": word, "--cert": file, "--key": file, "--ca": file,
		"--parallel": word, "--timeout": word, "--dry-run": none}},
	{path: "pki", subs: []string{"init", "issue"}},
	{path: "pki init", arg: dir, flags: map[string]string{"--name": word, "--years": word}},
	{path: "pki issue", arg: dir, flags: map[string]string{"--server": word, "--host": word, "--client": word,
		"--out": dir, "--days": word}},
	{path: "firmware", subs: []string{"push", "status"}},
	{path: "firmware push", arg: file, flags: map[string]string{"--no-reboot": none, "--allow-downgrade": none,
		"--upload-timeout": word}},
	{path: "completion", subs: []string{"bash"}},
}

// completion is `outpostctl completion bash`.
func (c *cmd) completion(args []string) error {
	if len(args) != 1 || args[0] != "bash" {
		return usageError(completionUsage)
	}
	return writeBashCompletion(c.out)
}

// writeBashCompletion writes a bash completion script for outpostctl:
// verbs and sub-verbs, each verb's flags and the global ones, files for
// FILE, BUNDLE and file-valued flags, directories for DIR, @FILE for
// --hosts. It runs in bash 3.2 and later (no associative arrays).
func writeBashCompletion(w io.Writer) error {
	var b strings.Builder
	b.WriteString(`# bash completion for outpostctl; install: source <(outpostctl completion bash)

# __outpostctl_subs PATH: the sub-verbs of PATH ("" = the verbs).
__outpostctl_subs() {
    case "$1" in
`)
	for _, v := range verbs {
		if len(v.subs) > 0 {
			fmt.Fprintf(&b, "    %q) echo %q ;;\n", v.path, strings.Join(v.subs, " "))
		}
	}
	b.WriteString(`    esac
}

# __outpostctl_flags PATH: the flags of PATH, globals included.
__outpostctl_flags() {
    case "$1" in
`)
	for _, v := range verbs {
		if len(v.flags) > 0 {
			fs := maps.Clone(globalFlags)
			maps.Copy(fs, v.flags)
			fmt.Fprintf(&b, "    %q) echo %q ;;\n", v.path, strings.Join(sortedKeys(fs), " "))
		}
	}
	fmt.Fprintf(&b, "    *) echo %q ;;\n", strings.Join(sortedKeys(globalFlags), " "))
	b.WriteString(`    esac
}

# __outpostctl_value FLAG: what FLAG's value is: file, dir, word, or
# nothing when FLAG takes none.
__outpostctl_value() {
    case "$1" in
`)
	kinds := map[string][]string{}
	all := maps.Clone(globalFlags)
	for _, v := range verbs {
		for k, kind := range v.flags {
			if prev, ok := all[k]; ok && prev != kind {
				panic(fmt.Sprintf("completion: %s is a %q and a %q", k, prev, kind))
			}
			all[k] = kind
		}
	}
	for _, k := range sortedKeys(all) {
		if all[k] != none {
			kinds[all[k]] = append(kinds[all[k]], k)
		}
	}
	for _, kind := range []string{file, dir, word} {
		fmt.Fprintf(&b, "    %s) echo %s ;;\n", strings.Join(kinds[kind], "|"), kind)
	}
	b.WriteString(`    esac
}

# __outpostctl_arg PATH: what PATH's positional argument is.
__outpostctl_arg() {
    case "$1" in
`)
	for _, v := range verbs {
		if v.arg != none {
			fmt.Fprintf(&b, "    %q) echo %s ;;\n", v.path, v.arg)
		}
	}
	b.WriteString(`    esac
}

__outpostctl_files() {
    local IFS=$'\n'
    COMPREPLY=($(compgen -f -- "$1"))
    compopt -o filenames 2>/dev/null
}

__outpostctl_dirs() {
    local IFS=$'\n'
    COMPREPLY=($(compgen -d -- "$1"))
    compopt -o filenames 2>/dev/null
}

_outpostctl() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local path="" i w subs
    COMPREPLY=()
    # Walk the words before the cursor: verbs and sub-verbs make the
    # path; a flag that takes a value skips it.
    for ((i = 1; i < COMP_CWORD; i++)); do
        w=${COMP_WORDS[i]}
        if [[ $w == -* ]]; then
            if [[ $w != *=* && -n $(__outpostctl_value "$w") ]]; then
                ((i++))
            fi
            continue
        fi
        subs=" $(__outpostctl_subs "$path") "
        if [[ $subs == *" $w "* ]]; then
            path=${path:+$path }$w
        fi
    done
    if [[ $prev == -* && $prev != *=* ]]; then
        case $(__outpostctl_value "$prev") in
        file) __outpostctl_files "$cur"; return ;;
        dir) __outpostctl_dirs "$cur"; return ;;
        word)
            if [[ $prev == --hosts && $cur == @* ]]; then
                __outpostctl_files "${cur#@}"
                COMPREPLY=("${COMPREPLY[@]/#/@}")
            fi
            return ;;
        esac
    fi
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(__outpostctl_flags "$path")" -- "$cur"))
        return
    fi
    subs=$(__outpostctl_subs "$path")
    if [[ -n $subs ]]; then
        COMPREPLY=($(compgen -W "$subs" -- "$cur"))
        return
    fi
    case $(__outpostctl_arg "$path") in
    file) __outpostctl_files "$cur" ;;
    dir) __outpostctl_dirs "$cur" ;;
    esac
}

complete -F _outpostctl outpostctl
`)
	_, err := io.WriteString(w, b.String())
	return err
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
