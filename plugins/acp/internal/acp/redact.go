package acp

import (
	"fmt"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// redactLog is a logger that writes each secret as ***: what the plugin
// and the sdk's process code log for a session (the agent's stderr lines
// among them, which an agent may fill with its MCP servers' env) never
// shows an MCP server's env value or header.
type redactLog struct {
	hclog.Logger
	r *strings.Replacer
}

// redactLogger wraps log; with no secrets it is log itself.
func redactLogger(log hclog.Logger, secrets []string) hclog.Logger {
	var pairs []string
	for _, s := range secrets {
		if s != "" {
			pairs = append(pairs, s, "***")
		}
	}
	if len(pairs) == 0 {
		return log
	}
	return redactLog{Logger: log, r: strings.NewReplacer(pairs...)}
}

func (l redactLog) args(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			out[i] = l.r.Replace(v)
		case error, fmt.Stringer:
			out[i] = l.r.Replace(fmt.Sprint(v))
		case []byte:
			out[i] = l.r.Replace(string(v))
		default:
			out[i] = a
		}
	}
	return out
}

func (l redactLog) Log(level hclog.Level, msg string, args ...any) {
	l.Logger.Log(level, l.r.Replace(msg), l.args(args)...)
}
func (l redactLog) Trace(msg string, args ...any) { l.Log(hclog.Trace, msg, args...) }
func (l redactLog) Debug(msg string, args ...any) { l.Log(hclog.Debug, msg, args...) }
func (l redactLog) Info(msg string, args ...any)  { l.Log(hclog.Info, msg, args...) }
func (l redactLog) Warn(msg string, args ...any)  { l.Log(hclog.Warn, msg, args...) }
func (l redactLog) Error(msg string, args ...any) { l.Log(hclog.Error, msg, args...) }

func (l redactLog) With(args ...any) hclog.Logger {
	return redactLog{Logger: l.Logger.With(l.args(args)...), r: l.r}
}
func (l redactLog) Named(name string) hclog.Logger {
	return redactLog{Logger: l.Logger.Named(name), r: l.r}
}
func (l redactLog) ResetNamed(name string) hclog.Logger {
	return redactLog{Logger: l.Logger.ResetNamed(name), r: l.r}
}
