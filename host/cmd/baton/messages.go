package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/baton-run/baton/host/internal/domain"
)

// Messages: what baton run and baton send send. A MESSAGE argument is the
// text; - reads it from stdin and --file PATH from a file (- too), for a
// message that is long or spans lines. Every message is checked before
// anything is connected to or written: it says something, it is UTF-8
// text, and it is at most domain.MaxMessageBytes (the API and the domain
// check the same, for clients other than this one).

// stdinArg is the MESSAGE (or --file) that means stdin.
const stdinArg = "-"

// messageInput is where a verb's messages come from: its MESSAGE
// arguments or its --file paths (one or the other).
type messageInput struct {
	args, files []string
}

// read reads and checks the messages, in order. usedStdin says whether
// one was read from stdin (which then cannot answer requests).
func (in messageInput) read(verb string, stdin io.Reader) (msgs []string, usedStdin bool, err error) {
	if len(in.args) > 0 && len(in.files) > 0 {
		return nil, false, usagef("%s: give MESSAGE arguments or --file, not both", verb)
	}
	sources := in.args
	if len(in.files) > 0 {
		sources = in.files
	}
	for i, src := range sources {
		var name, text string
		switch {
		case src == stdinArg:
			if usedStdin {
				return nil, false, usagef("%s: - (stdin) is given twice; stdin holds one message", verb)
			}
			usedStdin, name = true, "the message read from stdin (-)"
			if text, err = readStdin(verb, stdin); err != nil {
				return nil, false, err
			}
		case len(in.files) > 0:
			name = "--file " + src
			if text, err = readFile(verb, src); err != nil {
				return nil, false, err
			}
		default:
			name, text = "the message", src
			if len(sources) > 1 {
				name = fmt.Sprintf("message %d", i+1)
			}
		}
		if err := checkMessage(verb, name, text); err != nil {
			return nil, false, err
		}
		msgs = append(msgs, text)
	}
	return msgs, usedStdin, nil
}

// checkMessage is domain.CheckText for the CLI: a usage error naming the
// message, what is wrong, and what to give instead.
func checkMessage(verb, name, text string) error {
	switch problem := domain.CheckText(text); problem {
	case "":
		return nil
	case domain.CheckText(""):
		return usagef("%s: %s %s; give the text to send (- reads it from stdin, --file PATH from a file)", verb, name, problem)
	default:
		return usagef("%s: %s %s", verb, name, problem)
	}
}

// readStdin reads a message from stdin: at most one byte over the limit
// is kept; the rest is only counted, to say how long it was.
func readStdin(verb string, stdin io.Reader) (string, error) {
	b, err := io.ReadAll(io.LimitReader(stdin, domain.MaxMessageBytes+1))
	if err != nil {
		return "", usagef("%s: read the message from stdin: %v", verb, err)
	}
	if len(b) > domain.MaxMessageBytes {
		rest, _ := io.Copy(io.Discard, stdin)
		return "", usagef("%s: the message read from stdin (-) %s", verb, domain.TooLong(int64(len(b))+rest))
	}
	return string(b), nil
}

// readFile reads a message from a file (- is stdin), refusing one over
// the limit before reading it.
func readFile(verb, path string) (string, error) {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return "", usagef("%s: --file %s: %v", verb, path, fileProblem(err))
	case fi.IsDir():
		return "", usagef("%s: --file %s is a directory; give a file that holds the message", verb, path)
	case fi.Mode().IsRegular() && fi.Size() > domain.MaxMessageBytes:
		return "", usagef("%s: --file %s %s", verb, path, domain.TooLong(fi.Size()))
	}
	f, err := os.Open(path)
	if err != nil {
		return "", usagef("%s: --file %s: %v", verb, path, fileProblem(err))
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, domain.MaxMessageBytes+1))
	if err != nil {
		return "", usagef("%s: --file %s: %v", verb, path, fileProblem(err))
	}
	if len(b) > domain.MaxMessageBytes { // not a regular file: a pipe, a device
		rest, _ := io.Copy(io.Discard, f)
		return "", usagef("%s: --file %s %s", verb, path, domain.TooLong(int64(len(b))+rest))
	}
	return string(b), nil
}

// fileProblem is a file error without the path it already names (the
// caller names it).
func fileProblem(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// modeNames says the API's dispatch modes (queue_after_active, ...) in the
// CLI's words (queue, ...), as --mode takes them.
var modeNames = func() *strings.Replacer {
	var pairs []string
	for word, mode := range domain.ModeWords {
		pairs = append(pairs, string(mode), word)
	}
	return strings.NewReplacer(pairs...)
}()

// cliWords is an error message of the host in the CLI's words: the
// domain names dispatch modes by their long names, which --mode does not
// take.
func cliWords(msg string) string { return modeNames.Replace(msg) }
