package main

import (
	"context"

	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/host/internal/service"
	"github.com/baton-run/baton/host/internal/webui"
)

// serve runs the service on the data dir until ctx ends, then drains;
// with --store, on the log shared with other hosts (servestore.go).
func serve(ctx context.Context, g *globals, f *serveFlags, log hclog.Logger) error {
	cfg := service.Config{DataDir: g.data, Command: g.command, Listen: f.listen, TokenFile: g.tokenFile,
		TLSCert: f.tlsCert, TLSKey: f.tlsKey, IdleTimeout: f.idleTimeout,
		PluginDirs: append(append([]string(nil), g.pluginDirs...), pluginSearchPath(g.data)...), Logger: log,
		RawFrames: g.rawFrames, InterruptGrace: g.grace, TurnStallTimeout: g.stall, RequestTimeout: g.requests, Version: version, Pages: webui.FS(),
		MaxConnections: f.bounds.maxConnections, MaxStreams: f.bounds.maxStreams, ConnectionIdleTimeout: f.bounds.connIdle,
		Keepalive: f.bounds.keepalive, KeepaliveTimeout: f.bounds.keepaliveTimeout,
		MaxSubscribers: f.bounds.maxSubscribers, MaxThreadSubscribers: f.bounds.maxThreadSubscribers,
		SubscriberBuffer: f.bounds.subscriberBuffer, SlowSubscriber: f.bounds.slowSubscriber, Notify: f.webhooks}
	if f.shared.urls != nil {
		return serveShared(ctx, g.data, &f.shared, cfg, log)
	}
	return service.Run(ctx, cfg)
}
